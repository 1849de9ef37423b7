"""The discrete-event host model behind ``ufo_sim``.

:class:`SimHost` is the facade the managers and experiments use (see
doc/source/sim-calibration.rst); the event loop itself is the C
extension ``_core``, built on first use (``ufo_sim.engine.build``).
"""

from ufo_sim.engine.host import SimHost  # noqa: F401
from ufo_sim.engine.host import VmCounters  # noqa: F401
from ufo_sim.engine.spec import HostSpec  # noqa: F401
from ufo_sim.engine.spec import TIME_SCALE  # noqa: F401
