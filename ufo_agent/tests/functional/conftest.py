"""Functional tests: real libvirt, real QEMU, real guest kernel and module.

They need root (or sudo), the packages of bindep.txt and network access
to the Debian archive the first time (the test guest is built by
tools/build-test-guest.sh and cached). ``agent_user`` runs ufo-agent as
the packaged unit does: an unprivileged user in the libvirt and kvm
groups, without capabilities.
"""

import pytest

from ufo_tools import agentuser
from ufo_tools.tests.fixtures import guest_artifacts  # noqa: F401


@pytest.fixture(scope='session')
def agent_user():
    user = agentuser.AgentUser().ensure()
    user.grant_python()
    try:
        yield user
    finally:
        user.revoke()
