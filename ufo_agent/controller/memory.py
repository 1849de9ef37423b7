"""What the controller remembers about a VM between ticks, as values.

Each memory is a frozen value, replaced whole, never edited; None while
there is nothing to remember. By concern:

* the VM's last step: :class:`Step`, what it did or wants and why;
* guards that hold a move back: :class:`Shrink` (a shrink, one that
  was grown back at the same load, and the last one grown back soon);
* probes: :class:`DeniedProbe`, a probe up the host had no core for.

What a VM learns (its SF model, probe cache and trial) lives in
:mod:`.sfmodel` and :mod:`.predictor`.
"""

from ufo_agent import frozen


@frozen.value
class Step:
    """What a VM's last step did or wants (an Action), and its Reason."""

    action: object
    reason: object


@frozen.value
class Shrink:
    """A shrink from ``cores`` cores, at utilization ``util``, at ``time``."""

    cores: int
    util: float
    time: float


@frozen.value
class DeniedProbe:
    """A probe up from ``cores`` to ``target`` the host had no core for."""

    cores: int
    target: int
    util: float
    time: float
    idle: int       # idle cores left after the allocation that denied it
