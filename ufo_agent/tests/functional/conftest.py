"""Functional tests: real libvirt, real QEMU, real guest kernel and module.

They need root (or sudo), the packages of bindep.txt and network access
to the Debian archive the first time (the test guest is built by
tools/build-test-guest.sh and cached).
"""

from ufo_tools.tests.fixtures import guest_artifacts  # noqa: F401
