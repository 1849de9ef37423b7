"""pytest fixtures shared by the functional suites of every package."""

import pytest

from ufo_tools import testguest


@pytest.fixture(scope='session')
def guest_artifacts():
    """The test guest (kernel, initrd with the module), built once."""
    testguest.start_libvirtd()
    return testguest.build_artifacts()
