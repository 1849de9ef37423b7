"""Input and output of the host signal, as frozen dataclasses."""

import dataclasses
import math

UNDERLOADED = 'underloaded'
SATURATED = 'saturated'
OVERLOADED = 'overloaded'
#: The three states of paper Appendix B.4, from the least to the most loaded.
STATES = (UNDERLOADED, SATURATED, OVERLOADED)


def _check_count(name, value):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError('%s must be an integer number of cores, got %r'
                         % (name, value))
    if value < 0:
        raise ValueError('%s must be >= 0, got %d' % (name, value))


@dataclasses.dataclass(frozen=True)
class HostUsage:
    """One controller tick, as seen by the signal.

    All counts are physical-core allocation units.

    :param managed_cores: cores ufo-agent manages on this host.
    :param idle_cores: cores in the idle pool after this tick.
    :param reclaimable_cores: cores a new VM could get: the idle pool plus
        the cores held by idle VMs parked there, as the controller counts
        them.
    :param unmet_cores: cores the vCPU and emulator pools asked for in this
        tick and the idle pool could not supply.
    :param timestamp: wall-clock time of the tick, in seconds since the
        epoch.
    """

    managed_cores: int
    idle_cores: int
    reclaimable_cores: int
    unmet_cores: int
    timestamp: float

    @classmethod
    def from_plan(cls, plan, timestamp):
        """The usage of one controller tick (a ``HostPlan``).

        Offloaded I/O is charged: with an empty emulator pool (small
        hosts) the emulator, I/O and vhost threads run on the idle pool,
        so the cores they keep busy there (``emulator_util`` is measured
        against one core then) are not free for a new VM.
        """
        idle = len(plan.idle_cores)
        if not plan.emulator_cores and plan.emulator_util > 0:
            idle -= min(idle, math.ceil(plan.emulator_util - 1e-9))
        return cls(managed_cores=plan.managed_cores, idle_cores=idle,
                   reclaimable_cores=idle,
                   unmet_cores=plan.shortfall_cores, timestamp=timestamp)

    def __post_init__(self):
        for field in ('managed_cores', 'idle_cores', 'reclaimable_cores',
                      'unmet_cores'):
            _check_count(field, getattr(self, field))
        if self.idle_cores > self.managed_cores:
            raise ValueError('idle_cores (%d) exceeds managed_cores (%d)'
                             % (self.idle_cores, self.managed_cores))
        if self.reclaimable_cores > self.managed_cores:
            raise ValueError('reclaimable_cores (%d) exceeds managed_cores '
                             '(%d)' % (self.reclaimable_cores,
                                       self.managed_cores))
        if (isinstance(self.timestamp, bool)
                or not isinstance(self.timestamp, (int, float))):
            raise ValueError('timestamp must be a number of seconds, got %r'
                             % (self.timestamp,))


@dataclasses.dataclass(frozen=True)
class HostSignal:
    """The state of a host and the figures behind it.

    :param state: one of :data:`STATES`.
    :param sequence: increases by one with every signal a tracker emits.
    :param source: identifies the tracker (one per agent start), so that a
        receiver can tell a restarted agent from a replayed message.
    :param timestamp: the timestamp of the :class:`HostUsage` it comes from.
    """

    state: str
    idle_cores: int
    reclaimable_cores: int
    managed_cores: int
    unmet_cores: int
    sequence: int
    timestamp: float
    source: str

    def __post_init__(self):
        if self.state not in STATES:
            raise ValueError('state must be one of %s, got %r'
                             % (', '.join(STATES), self.state))
        for field in ('idle_cores', 'reclaimable_cores', 'managed_cores',
                      'unmet_cores', 'sequence'):
            _check_count(field, getattr(self, field))

    def same_report(self, other):
        """True when ``other`` reports the same state and figures.

        The sequence number and timestamp are not compared.
        """
        if other is None:
            return False
        return (self.state, self.idle_cores, self.reclaimable_cores,
                self.managed_cores, self.unmet_cores) == (
            other.state, other.idle_cores, other.reclaimable_cores,
            other.managed_cores, other.unmet_cores)
