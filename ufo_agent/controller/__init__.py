"""The UFO controller as a pure library (paper section 4, Appendix B).

Nothing here touches libvirt, /proc or shared memory: the agent feeds
samples in through :meth:`Controller.tick` and carries out the
:class:`~ufo_agent.controller.plan.HostPlan` it returns.
"""

from ufo_agent.controller.config import ControllerConfig  # noqa: F401
from ufo_agent.controller.controller import Controller  # noqa: F401
from ufo_agent.controller.plan import Decision  # noqa: F401
from ufo_agent.controller.plan import HostPlan  # noqa: F401
from ufo_agent.controller.plan import VmSample  # noqa: F401
from ufo_agent.controller.plan import VmSpec  # noqa: F401
from ufo_agent.controller.topology import HostTopology  # noqa: F401
