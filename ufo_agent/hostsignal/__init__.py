"""The host signal: what ufo-agent tells the cloud scheduler about a host.

``model``
    The immutable input (:class:`HostUsage`) and output (:class:`HostSignal`).
``tracker``
    :class:`HostSignalTracker`, the pure state machine with hysteresis.
``payload``
    The versioned wire format shared by the agent's publishers and the
    scheduler's signal cache.

Everything here is pure Python (stdlib only): no libvirt, no Nova, no I/O.
"""

from ufo_agent.hostsignal.model import HostSignal  # noqa: F401
from ufo_agent.hostsignal.model import HostUsage  # noqa: F401
from ufo_agent.hostsignal.model import OVERLOADED  # noqa: F401
from ufo_agent.hostsignal.model import SATURATED  # noqa: F401
from ufo_agent.hostsignal.model import STATES  # noqa: F401
from ufo_agent.hostsignal.model import UNDERLOADED  # noqa: F401
from ufo_agent.hostsignal.tracker import HostSignalTracker  # noqa: F401
from ufo_agent.hostsignal.tracker import Windows  # noqa: F401
