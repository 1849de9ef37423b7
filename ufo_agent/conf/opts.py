"""Entry point of oslo-config-generator (namespace ``ufo_agent``)."""

from ufo_agent.conf import agent
from ufo_agent.conf import channel
from ufo_agent.conf import controller
from ufo_agent.conf import host_cpus
from ufo_agent.conf import publishers
from ufo_agent.conf import signal

_MODULES = (agent, channel, controller, host_cpus, publishers, signal)


def list_opts():
    result = []
    for module in _MODULES:
        for group, opts in module.list_opts().items():
            result.append((group, opts))
    return result
