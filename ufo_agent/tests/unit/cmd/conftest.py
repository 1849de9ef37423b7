import logging

import pytest

from ufo_agent.cmd import agent
from ufo_agent.driver import base
from ufo_agent.hypervisor import sysfs


@pytest.fixture
def agent_main_state():
    """Undo what ``agent.main`` leaves behind: options, log handlers."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        agent.CONF.reset()
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.fixture
def eight_cpu_host(monkeypatch):
    """sysfs of a host with 8 online CPUs, one per core, no NUMA."""
    monkeypatch.setattr(sysfs, 'online_cpus',
                        lambda root=None: frozenset(range(8)))
    monkeypatch.setattr(sysfs, 'host_cpus', lambda root=None: base.HostCpus(
        tuple((c,) for c in range(8)), {}, frozenset(range(8))))
