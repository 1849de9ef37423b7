"""Functional tests: real libvirt, real QEMU, real guest kernel and module.

They need root (or sudo), the packages of bindep.txt and network access
to the Debian archive the first time (the test guest is built by
tools/build-test-guest.sh and cached).
"""

import pytest

from ufo_tools import testguest


@pytest.fixture(scope='session')
def guest_artifacts():
    testguest.start_libvirtd()
    return testguest.build_artifacts()
