"""Sizing of the shared emulator pool (top half of Algorithm 1).

Emulator, I/O and vhost threads of every managed VM share one pool. Keep
its utilization under ``emulator_util_high``: above it, grow until the
projected utilization is under ``emulator_util_low``; below the low mark,
shrink as long as the projected utilization stays under the high mark.

A projection that divides today's busy time by fewer cores assumes the
threads run as fast on a crowded pool as on a roomy one; they do not
(they share SMT cores and wait for each other), so a pool that grew at
busy B measures less than B right after, and the plain rule shrinks it
back at once, every other tick. :class:`EmulatorPool` remembers, for each
grow, the emulator busy time per unit of guest busy time before and
after it, and projects a shrink back to that size with the ratio of the
two, for ``sample_max_age`` seconds. Per unit of guest work, because on
a full host a grow squeezes guests and their traffic falls with it: that
fall is not the threads running faster.

Utilization says how busy the pool is, not whether a guest's I/O
queues in it. With ``emulator_saturation`` set, the pool also grows by a
core once some guest's emulator threads have been saturated on
``settle_time`` ticks of the last twice that many on the same pool
size: their CPU time plus run delay, per thread, at or above the mark,
and they waited for a CPU (:func:`saturated`). A k-thread queue near
saturation turns any CPU its threads wait for into queueing delay of
the guest's requests, while one far from it absorbs the wait. Counted
over a window, not in a row: a queue short of CPU flips between
draining and collapsing, saturated every other tick or so. While it
collapses, its threads wait for each other and run less, so the pool's
utilization falls: the pool does not shrink on a tick when some guest
is saturated.
A size the pool grew from for saturation is not shrunk back to while
the guests' busy time stays within ``sf_match_tolerance`` of what it
was then (for ``sample_max_age`` seconds): the threads would wait there
again.

A grow for saturation alone (utilization under ``emulator_util_high``)
removes nothing but the threads' run delay: the pool has room, and their
own work keeps them as busy on a larger one. When that grow would take
the last core a guest could grow into (the last idle core, or a guest's)
while some guest runs at ``pcu_high`` or more of the cores it holds, the
guest's vCPUs are the queue that is short, and the core goes to them:
the adaptive emulator-thread scheduler balances the emulator threads'
run delay against the vCPUs', it does not drive the former to zero. The
pool remembers the size it ceded at, the emulator threads' busy time
and the guests saturated then, and while that busy time stays within
``sf_match_tolerance`` (for ``sample_max_age`` seconds) the same
guests' saturation does not take the core on a later tick either, when
the guest given the core no longer runs at the mark
(:meth:`EmulatorPool.cedes`): the saturation was weighed once, and
trading the core back and forth costs the guest its QoS. The saturation
of another guest is new evidence, and so is the core left idle: nobody
took it.

With ``emulator_util_overload`` set, a full host (some guest holds
fewer cores than it committed) changes three things. The pool's memories
learn nothing normalized by guests' busy time on such a tick: a squeeze
cuts the guests' busy time by more than the emulator's, so crowding
read there is 1.0 and a grow for saturation would be forgotten at once.
A size kept for saturation is instead released once the emulator
threads' own busy time has fallen by ``sf_match_tolerance``, and any
grow made on a full host while some guest is saturated keeps its size.
And the pool may give a core back to a guest
(:meth:`EmulatorPool.may_yield`) while its projected utilization one
core smaller stays under the mark: a guest short of its committed cores
misses QoS at once, a pool under the mark does not. A size the pool
has not measured may be tried while the linear projection there stays
under one core's worth (:meth:`EmulatorPool.may_try`): on a denser pool
the threads wake less and spend less per unit of work, so the linear
projection reads high, and the mark judges the smaller pool once it
runs there (a grow back at the mark is remembered,
:meth:`EmulatorPool.grew_back`, and that size is not tried again under
the same load). The guest given the core may run more I/O on it at
once, which the projection does not count: a grow back remembers by
how much the threads' busy time rose at the smaller size, and under
the same load the pool projects that size with the rise, for a yield
and for the band's shrink while a guest is short of cores (else the
pool goes round every third tick: a grow at the mark, the core given
back, a grow again). After a yield, while no core is idle, the pool
does not grow back under the mark, whatever the saturation and while
the emulator load stays as it was: taking the core back and yielding
it again, every other tick, costs the guest its QoS for nothing. With
a core idle, another guest's saturation still does not take it back,
while that of a guest that was short of cores at the yield does: its
own I/O queues (:meth:`EmulatorPool.holds_yield`, both cases). The
pool also yields a core to a guest's denied probe (the controller picks
the guest, and takes the core back if the probe's trial does not keep
it), and holds that size the same way.

A pool may be empty (``emulator_min_cores = 0``, for small hosts): its
threads then borrow shared CPUs, and its utilization is measured against
one core, so that it gets a core of its own once they would keep one busy
above the high mark, and gives it back below the low mark.
"""

import collections
import dataclasses

from ufo_agent.controller import reason
from ufo_agent import frozen

# Bounds of a learned crowding ratio: a measurement outside them is noise.
_MIN_CROWDING = 1.0
_MAX_CROWDING = 3.0
# Below this CPU time (% of one CPU) a guest's emulator threads are idle.
_MIN_BUSY_PCT = 5.0
# Run delay, as a share of CPU time, that counts as waiting for a CPU.
_MIN_WAIT_SHARE = 0.02
# A yield to a guest one core short may try a size the pool has not
# measured while the linear projection there stays under this: the
# threads would fit (EmulatorPool.may_yield).
_TRIAL_BOUND = 1.0

# The rules that size the pool; controller.rst has a table of them, and
# every emulator decision's reason starts with the one that decided.
BAND = 'band'                       # utilization band, with memories
SATURATION = 'saturation'           # a core for saturated threads
CEDE = 'cede'                       # saturation gives way to vCPUs
FULL_HOST_HOLD = 'full-host-hold'   # a full host: no grow under the mark
FULL_HOST_GROW = 'full-host-grow'   # a full host: one core at a time
YIELD_TO_SHORT = 'yield-to-short'   # a core back to a guest one short
YIELD_TO_PROBE = 'yield-to-probe'   # a core for a denied probe
PROBE_TAKE_BACK = 'probe-take-back'  # the probe ended: core back
CONFIRM_SQUEEZE = 'confirm-squeeze'  # a grow taking guests' cores waits
# QoS-target mode: a pool whose guests all report their latency.
LATENCY_POOL_TRIAL = 'latency-pool-trial'    # a core fewer, on trial
LATENCY_POOL_HOLD = 'latency-pool-hold'      # latency holds the size
LATENCY_POOL_REVERT = 'latency-pool-revert'  # a guest violated: back
RULES = (BAND, SATURATION, CEDE, FULL_HOST_HOLD, FULL_HOST_GROW,
         YIELD_TO_SHORT, YIELD_TO_PROBE, PROBE_TAKE_BACK, CONFIRM_SQUEEZE,
         LATENCY_POOL_TRIAL, LATENCY_POOL_HOLD, LATENCY_POOL_REVERT)


def _pool_text(name):
    def render(values):
        saturated, yields = values['saturated'], values['yields']
        return '%s: emulator pool utilization %.0f%%%s%s' % (
            name, values['util'],
            '; emulator threads of %s saturated' % ', '.join(saturated)
            if saturated else '',
            '; yields a core: %s' % '; '.join(str(y) for y in yields)
            if yields else '')
    return render


for _name in RULES:
    reason.rule(_name, _pool_text(_name))
# Whom a core is yielded to (a PoolDecision's ``yields``).
SHORT_GUEST = reason.rule(
    'short-guest', '%(vm)s runs one core short of its committed cores at '
    'PCU %(pcu).0f%%')
DENIED_PROBE = reason.rule(
    'denied-probe', '%(vm)s was denied a probe to %(target)d cores at PCU '
    '%(pcu).0f%%')


@dataclasses.dataclass(frozen=True)
class ShortGuest:
    """An active guest placed on fewer cores than it committed."""

    uuid: str
    cores: int          # cores it holds
    committed: int      # cores it committed, at most its flavor's
    pcu: float          # utilization per CPU of those cores
    # Its own latency is above its target (QoS-target mode): short of
    # cores whatever its utilization reads.
    violating: bool = False


@dataclasses.dataclass(frozen=True)
class ProbeCandidate:
    """A settled guest's probe up, denied at the load it runs now."""

    uuid: str
    cores: int
    target: int
    pcu: float


@frozen.value
class ActiveGuest:
    """An active guest's cores held, and whether it is probing now."""

    cores: int
    probing: bool


@dataclasses.dataclass(frozen=True)
class LatencyGuests:
    """The pool's guests, when every one reports a fresh latency.

    ``slack``: each is settled, in no trial of its own and under
    ``latency_slack`` times its target; ``violating``: some guest that
    is settled and in no trial of its own is over its target.
    """

    slack: bool
    violating: bool


@dataclasses.dataclass(frozen=True)
class PoolView:
    """What the pool's policy sees of one tick.

    ``busy_pct`` is the CPU time of every emulator thread over the tick
    (% of one CPU); ``guest_pct`` the active guests' busy time (the sum
    of their utilization); ``saturated`` the active guests whose
    emulator threads are saturated (:func:`saturated`); ``short`` the
    :class:`ShortGuest`; ``room`` the idle cores a guest could grow
    into (:meth:`Controller._idle_room`); ``deficit`` the active guests
    at ``pcu_high`` or more with room to grow; ``probes`` the
    :class:`ProbeCandidate`; ``active`` maps each active guest to its
    :class:`ActiveGuest`; ``takes_guest_cores(size)`` says whether a pool
    of ``size`` cores would take some guest's committed cores;
    ``latency`` the :class:`LatencyGuests`, or None while some guest
    sharing the pool is not in the QoS-target mode with a fresh latency.
    """

    now: float
    cores: int
    pcpus: int
    busy_pct: float
    pcpus_per_core: int
    max_cores: int
    guest_pct: float
    saturated: tuple = ()
    short: tuple = ()
    room: int = None
    deficit: tuple = ()
    probes: tuple = ()
    active: dict = dataclasses.field(default_factory=dict)
    takes_guest_cores: object = None
    latency: LatencyGuests = None


@dataclasses.dataclass(frozen=True)
class PoolDecision:
    """The pool's size for this tick and the rule that set it.

    ``yields`` says why a core is yielded (reasons of rule
    ``short-guest`` or ``denied-probe``); ``yielded_to`` names the
    guests one core short the pool yields a core to (the allocator gives
    it to one of them); ``probe`` the guest whose denied probe goes ahead
    on the core yielded to it.
    """

    size: int
    util: float
    rule: str
    yields: tuple = ()
    yielded_to: frozenset = None
    probe: str = None

    def reason(self, saturated=()):
        """The decision's :class:`~.reason.Reason`: its rule, and values."""
        return reason.of(self.rule, util=100 * self.util,
                         saturated=tuple(saturated), yields=self.yields)


def wanted_cores(current_cores, current_pcpus, busy_pct, pcpus_per_core,
                 config, max_cores, crowding=None, kept=()):
    """Return (cores wanted, current utilization as a fraction).

    ``busy_pct`` is the CPU time of all emulator threads in percent of one
    CPU (150 means 1.5 CPUs busy) over the last tick. ``crowding`` maps a
    smaller pool size to the factor by which busy time grows back there;
    the pool does not shrink to a size in ``kept``.
    """
    busy = max(0.0, float(busy_pct))
    crowding = crowding or {}
    # An empty pool is measured as if it had one core (module docstring).
    util = busy / (100.0 * (current_pcpus or pcpus_per_core))
    floor = min(config.emulator_min_cores, max_cores)

    def projected(cores):
        return busy / (100.0 * max(cores, 1) * pcpus_per_core)

    if util > config.emulator_util_high:
        cores = max(current_cores, floor)
        while cores < max_cores and projected(cores) >= \
                config.emulator_util_low:
            cores += 1
        return cores, util
    if util < config.emulator_util_low:
        cores = current_cores
        while cores > floor and cores - 1 not in kept and \
                projected(cores - 1) * crowding.get(
                    cores - 1, 1.0) < config.emulator_util_high:
            cores -= 1
        return max(cores, floor), util
    return max(current_cores, floor), util


def saturated(samples, config):
    """Keys of the samples whose emulator threads are saturated.

    Occupancy is CPU time plus run delay per thread (a fraction of one
    CPU); saturated at ``emulator_saturation`` or more, and only while
    the threads waited for a CPU (at least _MIN_WAIT_SHARE of their CPU
    time): a guest whose threads are busy by their own work gains
    nothing from a larger pool.
    """
    mark = config.emulator_saturation
    if mark <= 0:
        return []
    found = []
    for key, s in sorted(samples.items()):
        if s.emulator_threads <= 0 or s.emulator < _MIN_BUSY_PCT:
            continue
        occupancy = (s.emulator + s.emulator_wait) / (
            100.0 * s.emulator_threads)
        if occupancy >= mark and \
                s.emulator_wait >= _MIN_WAIT_SHARE * s.emulator:
            found.append(key)
    return found


@dataclasses.dataclass(frozen=True)
class _Kept:
    """A size the pool grew from for saturation."""

    time: float
    guest_pct: float    # guests' busy time then
    busy_pct: float     # the emulator threads' busy time then


@dataclasses.dataclass(frozen=True)
class _Yield:
    """A size the pool yielded a core to a guest at."""

    time: float
    busy_pct: float     # the emulator threads' busy time then
    guests: frozenset   # the guests short of cores then, who may get it


@dataclasses.dataclass(frozen=True)
class _Shrunk:
    """A size the band shrank the pool to while a guest was short."""

    time: float
    busy_pct: float     # the emulator threads' busy time then


@dataclasses.dataclass(frozen=True)
class _Ceded:
    """A size at which a grow for saturation gave way to guests' vCPUs."""

    time: float
    busy_pct: float     # the emulator threads' busy time then
    guests: frozenset   # the guests whose threads were saturated then


@dataclasses.dataclass(frozen=True)
class _Measured:
    """What the pool measured at a size (emulator_util_overload)."""

    time: float
    per_guest: float    # emulator busy per guest busy, on a settled tick


@dataclasses.dataclass(frozen=True)
class _FailedMove:
    """A size a move went to and left again at the mark.

    A yield or the band's shrink the pool grew back from, or a latency
    trial it went back from.
    """

    time: float
    busy_pct: float     # the emulator threads' busy time at the yield
    # Their busy time at the smaller size over busy_pct (1.0 or more).
    rise: float = 1.0


@dataclasses.dataclass(frozen=True)
class _ProbeYield:
    """A core yielded to ``vm``'s probe up from ``cores``, to ``size``."""

    vm: str
    cores: int
    size: int


@dataclasses.dataclass
class _LatencyTrial:
    """The pool on ``size`` cores, one fewer than ``origin``, on trial."""

    size: int
    origin: int
    busy_pct: float         # the emulator threads' busy time at the start
    accepted: bool = False  # it settled with no guest over its target
    violating: int = 0      # ticks in a row some guest was over it


@dataclasses.dataclass
class _Grow:
    per_guest_before: float     # emulator busy per guest busy
    time: float
    crowding: float = None


class EmulatorPool:
    """The pool's size decisions, with the memory of each grow."""

    def __init__(self, config):
        self.config = config
        self._grows = {}    # size it grew from -> _Grow
        # Size it grew from for saturation -> _Kept.
        self._saturated = {}
        # Size -> _Measured, on the last settled tick at that size that
        # squeezed nobody.
        self._measured = {}
        # Size it yielded a core to a guest at -> _Yield.
        self._yielded = {}
        # Size the band shrank to on a full host -> _Shrunk.
        self._shrunk = {}
        # Size a yield or such a shrink went to and grew back from at the
        # mark -> _FailedMove.
        self._failed_moves = {}
        # Size a grow for saturation gave way to guests' vCPUs at -> _Ceded.
        self._ceded = {}
        # One bool per recent tick: was some guest saturated? Counted on
        # one pool size (_recent_cores) and kept while a grow waits to be
        # confirmed. No maxlen: settle_time may change at runtime.
        self._recent = collections.deque()
        self._recent_cores = None
        self._size = None           # the pool's size, seen since _size_since
        self._size_since = None
        # (guest, its cores, pool size) of a yield to a probe not yet
        # judged.
        self._probe_yield = None
        # Ticks in a row that asked for a grow taking guests' cores.
        self._squeeze_asks = 0
        # QoS-target mode: the size on trial or held by the guests'
        # latency (_LatencyTrial), and the sizes such a trial went back
        # from (size -> _FailedMove).
        self._latency_trial = None
        self._failed_latency = {}

    def latency_trial_open(self):
        """True while a latency trial of the pool is not yet judged."""
        trial = self._latency_trial
        return trial is not None and not trial.accepted

    def crowding(self, now):
        """{smaller size: learned busy ratio} still within memory."""
        horizon = now - self.config.sample_max_age
        for size in [s for s, g in self._grows.items() if g.time < horizon]:
            del self._grows[size]
        return {size: g.crowding for size, g in self._grows.items()
                if g.crowding is not None}

    def kept(self, now, guest_pct, busy_pct=None):
        """Sizes not to shrink back to (module docstring)."""
        horizon = now - self.config.sample_max_age
        floor = 1.0 - self.config.sf_match_tolerance
        for size in [s for s, k in self._saturated.items()
                     if k.time < horizon]:
            del self._saturated[size]
        if self.config.emulator_util_overload > 0 and busy_pct is not None:
            # Squeezed or not, the threads' own work says the burst is over.
            return frozenset(size for size, k in self._saturated.items()
                             if busy_pct >= k.busy_pct * floor)
        return frozenset(size for size, k in self._saturated.items()
                         if guest_pct >= k.guest_pct * floor)

    def projected(self, now, cores, busy_pct, pcpus_per_core, guest_pct):
        """Utilization the pool's threads would have on ``cores`` cores.

        Today's busy time spread over fewer CPUs, times any crowding
        learned; or, if higher, what the pool measured at that size (its
        emulator busy time per unit of guests' busy time, on a tick that
        squeezed nobody after the pool had held that size for
        ``settle_time``, within ``sample_max_age``) for today's guests'
        busy time. The measured ratio is of another mix of guests' loads,
        so it may only hold the pool back (doc/source/research/
        2026-11-29-overload-yield.rst). Against today's ratio it is
        crowding, and bounded like learned crowding: threads busy by
        their fixed work (timers, polling) at a light load read as a
        high ratio, which a busy guest's load does not scale
        (doc/source/research/2026-11-28-light-guest-fixes.rst).
        """
        busy = max(0.0, float(busy_pct))
        factor = self.crowding(now).get(cores, 1.0)
        measured = self._measured.get(cores)
        if measured is not None and busy > 0 and \
                now - measured.time <= self.config.sample_max_age:
            factor = max(factor, min(
                _MAX_CROWDING,
                measured.per_guest * max(0.0, guest_pct) / busy))
        return busy * factor / (100.0 * max(cores, 1) * pcpus_per_core)

    def may_yield(self, now, current_cores, busy_pct, pcpus_per_core,
                  guest_pct, trial=False):
        """True if the pool may give one core to a squeezed guest.

        Only with ``emulator_util_overload`` set, never below
        ``emulator_min_cores`` or to a size kept for saturation, and only
        while the pool one core smaller projects under that mark. With
        ``trial``, a size :meth:`may_try` allows may project up to
        _TRIAL_BOUND: the linear projection ignores that the threads
        spend less per unit of work on a denser pool (fewer wake-ups),
        and the mark judges the smaller pool once it runs there.
        """
        mark = self.config.emulator_util_overload
        size = current_cores - 1
        if mark <= 0 or size < self.config.emulator_min_cores or \
                size in self.kept(now, guest_pct, busy_pct):
            return False
        bound = _TRIAL_BOUND if trial and \
            self.may_try(now, size, busy_pct) else mark
        return self.projected(now, size, busy_pct, pcpus_per_core,
                              guest_pct) * self._rise(now, size,
                                                      busy_pct) < bound

    def may_try(self, now, size, busy_pct):
        """True if a yield may try ``size`` on its linear projection.

        Not where the pool measured its threads within
        ``sample_max_age`` (that measure holds it back), nor where a
        yield grew back at the mark under this load: within
        ``sample_max_age``, and while the emulator threads' busy time
        stays within ``sf_match_tolerance`` of what it was at that yield.
        """
        age = self.config.sample_max_age
        measured = self._measured.get(size)
        if measured is not None and now - measured.time <= age:
            return False
        return self._failed_at(now, size, busy_pct) is None

    def _rise(self, now, size, busy_pct):
        """How much the threads' busy time rose when the pool went to ``size``.

        Measured by the last grow back at the mark from ``size``
        (:meth:`grew_back`); 1.0 once that is not this load.
        """
        failed = self._failed_at(now, size, busy_pct)
        return 1.0 if failed is None else failed.rise

    def _failed_at(self, now, size, busy_pct):
        """The :class:`_FailedMove` of ``size`` if it holds at this load."""
        failed = self._failed_moves.get(size)
        if failed is not None and \
                self._same_load(now, failed.time, failed.busy_pct, busy_pct):
            return failed
        return None

    def _same_load(self, now, then, busy_then, busy_pct):
        """True if a memory from ``then`` still holds at ``busy_pct``.

        Within ``sample_max_age``, and with the emulator threads' busy
        time within ``sf_match_tolerance`` of ``busy_then``.
        """
        return now - then <= self.config.sample_max_age and \
            abs(busy_pct - busy_then) <= \
            self.config.sf_match_tolerance * busy_then

    def grew_back(self, now, size, busy_pct):
        """The pool grew at the mark from ``size``: a yield there failed.

        So did the band's shrink to ``size`` on a full host. ``busy_pct``
        is the threads' busy time at ``size``: within ``settle_time`` of
        the move, its rise over the busy time before is the move's (the
        guest given the core), later it may be the guests' load.
        """
        went = [k for k in (self._yielded.get(size), self._shrunk.get(size))
                if k is not None]
        if went:
            last = max(went, key=lambda k: k.time)
            rise = 1.0
            if last.busy_pct > 0 and \
                    now - last.time <= self.config.settle_time + 1e-6:
                rise = max(1.0, busy_pct / last.busy_pct)
            self._failed_moves[size] = _FailedMove(now, last.busy_pct, rise)

    def yielded(self, now, size, busy_pct, short):
        """The pool gave a core to the guests ``short`` of cores.

        It is now ``size`` cores; the allocator decides which of them
        gets the core (none are named for a denied probe's core).
        """
        self._yielded[size] = _Yield(now, busy_pct, frozenset(short))

    def holds_yield(self, now, size, busy_pct, saturated=()):
        """True if a yield at ``size`` holds back a grow for ``saturated``.

        The controller asks with no guest ``saturated`` while no core is
        idle: then any saturation is held back. Within
        ``sample_max_age``, while the emulator threads' busy time
        stays within ``sf_match_tolerance`` of what it was at the yield
        (theirs, not the guests': the guest given the core does more work
        at once), and unless a guest that was short of cores then is
        among the saturated: its own I/O queues, the core did not help it.
        """
        k = self._yielded.get(size)
        if k is None:
            return False
        if not self._same_load(now, k.time, k.busy_pct, busy_pct):
            del self._yielded[size]
            return False
        return not k.guests.intersection(saturated)

    def cedes(self, now, size, busy_pct, saturated=(), deficit=(),
              spare=False):
        """True if a grow at ``size`` gives way to guests' vCPUs.

        Called only when the grow would take the last core a guest could
        grow into. ``deficit`` names the guests at ``pcu_high`` or more
        of the cores they hold that could use it; ``saturated`` the guests
        whose threads are saturated now; ``spare`` says that core is
        still idle. Gives way while some guest is in ``deficit`` (and
        remembers it), or while an earlier cede at this size holds: the
        core went to a guest (not ``spare``), within ``sample_max_age``,
        the emulator threads' busy time within ``sf_match_tolerance`` of
        what it was then, and no guest saturated now that was not then
        (module docstring).
        """
        k = self._ceded.get(size)
        if k is not None and \
                not self._same_load(now, k.time, k.busy_pct, busy_pct):
            del self._ceded[size]
            k = None
        if k is not None and not spare and k.guests.issuperset(saturated):
            return True
        if deficit:
            self._ceded[size] = _Ceded(now, busy_pct, frozenset(saturated))
            return True
        return False

    def _band(self, now, current_cores, current_pcpus, busy_pct,
              pcpus_per_core, max_cores, guest_pct, saturated=(),
              squeezed=False, idle_room=None, deficit=()):
        """(cores wanted, utilization, rule); see :func:`wanted_cores`.

        Its rules: ``band``, ``saturation`` and ``cede``.

        ``guest_pct`` is the guests' busy time over the same tick (the sum
        of the active VMs' utilization, % of one CPU); ``saturated`` names
        the guests whose emulator threads are saturated (:func:`saturated`);
        ``squeezed`` says some guest held fewer cores than it committed;
        ``idle_room`` is how many idle cores guests could grow into (None:
        not counted), and ``deficit`` names the guests that could use
        them (:meth:`cedes`).
        """
        # A grow takes the last core a guest could grow into.
        scarce = idle_room is not None and idle_room <= 1
        spare = idle_room is not None and idle_room > 0
        busy = max(0.0, float(busy_pct))
        per_guest = busy / guest_pct if guest_pct > 0 else None
        overload = self.config.emulator_util_overload > 0
        blind = overload and squeezed   # learns nothing per guest busy
        if current_cores != self._size:
            self._size, self._size_since = current_cores, now
        settled = self._settled(now)
        if overload and settled and not squeezed and per_guest is not None:
            self._measured[current_cores] = _Measured(now, per_guest)
        for size, grow in list(self._grows.items()):
            if grow.crowding is not None:
                continue
            # The first tick after a grow measures the roomier pool.
            if per_guest is None or grow.per_guest_before is None or blind:
                del self._grows[size]
                continue
            ratio = grow.per_guest_before / max(per_guest, 1e-9)
            grow.crowding = min(_MAX_CROWDING, max(_MIN_CROWDING, ratio))
        want, util = wanted_cores(current_cores, current_pcpus, busy,
                                  pcpus_per_core, self.config, max_cores,
                                  self.crowding(now),
                                  self.kept(now, guest_pct,
                                            busy if overload else None))
        # A burst's backlog drains through the threads at full occupancy
        # for a second or two: that alone never reaches settle_time.
        needed = max(1, int(round(self.config.settle_time /
                                  self.config.tick_interval)))
        if current_cores != self._recent_cores:
            self._recent.clear()
            self._recent_cores = current_cores
        self._recent.append(bool(saturated))
        while len(self._recent) > 2 * needed:
            self._recent.popleft()
        rule = BAND
        if sum(self._recent) >= needed and current_cores < max_cores:
            if want <= current_cores and scarce and \
                    self.cedes(now, current_cores, busy, saturated, deficit,
                               spare):
                rule = CEDE
            else:
                if want <= current_cores:
                    rule = SATURATION
                want = max(want, current_cores + 1)
                self._saturated[current_cores] = _Kept(now, guest_pct, busy)
        if saturated:
            want = max(want, current_cores)
            if overload and squeezed and want > current_cores:
                # Grown on a full host while a guest's threads queue:
                # a yield of that core would make them queue again on the
                # next tick. (Not at a start, on cores nobody committed.)
                self._saturated[current_cores] = _Kept(now, guest_pct, busy)
        if want > current_cores:
            self._grows[current_cores] = _Grow(
                None if blind else per_guest, now)
        return want, util, rule

    # -- the policy's entry point ------------------------------------------
    def decide(self, view):
        """The pool's :class:`PoolDecision` for one tick's :class:`PoolView`.

        The rules, in the order they apply: the utilization band with
        its memories (``band``), a core for saturated threads
        (``saturation``) unless it gives way to guests' vCPUs
        (``cede``); the core of a probe that ended taken back
        (``probe-take-back``); on a full host (``emulator_util_overload``
        set), grows held under the mark (``full-host-hold``) or made one
        core at a time (``full-host-grow``), and a core yielded to a
        guest one core short (``yield-to-short``) or to a denied probe
        (``yield-to-probe``); a grow that takes guests' committed cores
        waits for ``confirm_samples`` asks in a row
        (``confirm-squeeze``).
        """
        cfg = self.config
        cores = view.cores
        want, util, rule = self._band(
            view.now, cores, view.pcpus, view.busy_pct,
            view.pcpus_per_core, view.max_cores, view.guest_pct,
            view.saturated, squeezed=bool(view.short),
            idle_room=view.room, deficit=view.deficit)
        taken = self._take_back_from_probe(view, want)
        if taken != want:
            want, rule = taken, PROBE_TAKE_BACK
        why, yielded_to, probe = (), None, None
        judged = self._on_latency(view, want, util)
        if judged is not None:
            want, rule = judged
        elif cfg.emulator_util_overload > 0:
            size, rule_now, why, yielded_to = self._under_overload(
                view, want, util)
            if size != want or rule_now is not None:
                want, rule = size, rule_now or rule
            if want == cores and not why and not view.saturated:
                probe, why = self._yield_to_probe(view)
                if probe is not None:
                    want, rule = cores - 1, YIELD_TO_PROBE
        if want > cores and view.takes_guest_cores(want):
            # Taking guests' cores costs them QoS at once, and a
            # one-second burst of I/O is gone by the next tick: the grow
            # waits for confirm_samples asks in a row, as VM moves do.
            self._squeeze_asks += 1
            if self._squeeze_asks < cfg.confirm_samples:
                want, rule = cores, CONFIRM_SQUEEZE
        else:
            self._squeeze_asks = 0
        return PoolDecision(want, util, rule, why, yielded_to, probe)

    def _on_latency(self, view, want, util):
        """(size, rule) of a pool judged on its guests' latency, or None.

        Only with ``emulator_util_overload`` set and while every guest
        sharing the pool reports a fresh latency (``view.latency``): a
        settled pool whose guests all have slack, in no trial of their
        own, tries one core fewer while it projects under that mark
        there, with no guest saturated or short of cores
        (``latency-pool-trial``). The band does not grow it back
        (``latency-pool-hold``) while no guest is over its target and
        its threads' work fits (utilization under _TRIAL_BOUND). Either
        (on a settled pool; on ``confirm_samples`` ticks in a row
        before) sends it back (``latency-pool-revert``), and that size
        is not tried again while the emulator threads' busy time stays
        within ``sf_match_tolerance`` of the trial's, for
        ``sample_max_age``. A report gone stale, or another rule's move,
        ends the trial without a verdict: the band decides again.
        """
        cfg = self.config
        guests, trial = view.latency, self._latency_trial
        now, cores, busy = view.now, view.cores, view.busy_pct
        if trial is not None and (guests is None or trial.size != cores):
            self._latency_trial = trial = None
        mark = cfg.emulator_util_overload
        if guests is None or mark <= 0:
            return None
        settled = self._settled(now)
        if trial is not None:
            missed = guests.violating or util >= _TRIAL_BOUND
            trial.violating = trial.violating + 1 if missed else 0
            if missed and (settled or
                           trial.violating >= cfg.confirm_samples):
                self._latency_trial = None
                self._failed_latency[trial.size] = _FailedMove(
                    now, trial.busy_pct)
                return trial.origin, LATENCY_POOL_REVERT
            trial.accepted = trial.accepted or settled
            if want > cores:
                return cores, LATENCY_POOL_HOLD
            return None
        size = cores - 1
        if want != cores or not settled or not guests.slack or \
                view.saturated or view.short or \
                self._probe_yield is not None or \
                size < max(1, cfg.emulator_min_cores) or \
                size in self.kept(now, view.guest_pct, busy):
            return None
        failed = self._failed_latency.get(size)
        if failed is not None and \
                self._same_load(now, failed.time, failed.busy_pct, busy):
            return None
        if self.projected(now, size, busy, view.pcpus_per_core,
                          view.guest_pct) >= mark:
            return None
        self._latency_trial = _LatencyTrial(size, cores, busy)
        return size, LATENCY_POOL_TRIAL

    def _settled(self, now):
        """True once the pool has held its size for ``settle_time``."""
        return now - self._size_since + self.config.tick_interval >= \
            self.config.settle_time - 1e-6

    def _under_overload(self, view, want, util):
        """(size, rule or None, why it yielded (reasons), guests yielded to).

        Each core the pool takes from a guest's committed cores is that
        guest's QoS: the pool takes them only from the mark up or for
        saturated threads, one at a time. Below the mark it gives one
        back to a guest one core short that runs at the mark of every
        CPU it has (or, with none, to the hottest one over
        ``pcu_high``), unless some guest's threads are saturated, possibly
        as a trial of a size it has not measured (:meth:`may_try`),
        which the mark judges; after that, saturation under the mark
        does not take it back while the load stays (:meth:`holds_yield`,
        with any saturation while no core is idle). A yield, or the
        band's shrink while a guest is short, projects a size it grew
        back from with the rise it measured there (:meth:`grew_back`).
        """
        mark = self.config.emulator_util_overload
        now, cores, busy = view.now, view.cores, view.busy_pct
        if want > cores:
            if util < mark and view.room <= 0 and \
                    self.holds_yield(now, cores, busy):
                return cores, FULL_HOST_HOLD, (), None
            if not view.takes_guest_cores(want):
                return want, None, (), None
            if util < mark and (not view.saturated or self.holds_yield(
                    now, cores, busy, view.saturated)):
                return cores, FULL_HOST_HOLD, (), None
            if util >= mark:
                self.grew_back(now, cores, busy)
            return cores + 1, FULL_HOST_GROW, (), None
        if want < cores and view.short:
            # The band's shrink gives a core to a guest short of cores.
            for size in range(want, cores):
                rise = self._rise(now, size, busy)
                if rise > 1.0 and rise * self.projected(
                        now, size, busy, view.pcpus_per_core,
                        view.guest_pct) >= mark:
                    return cores, FULL_HOST_HOLD, (), None
            self._shrunk[want] = _Shrunk(now, busy)
            return want, None, (), None
        if want < cores or view.saturated or not view.short:
            return want, None, (), None
        one_short = [g for g in view.short if g.committed - g.cores == 1]
        eligible = [g for g in one_short if g.pcu >= mark or g.violating]
        if not eligible:
            # A guest over the PCU band queues before it reads the mark:
            # the hottest one.
            over = [g for g in one_short if g.pcu >= self.config.pcu_high]
            eligible = [max(over, key=lambda g: g.pcu)] if over else []
        if not eligible or not self.may_yield(now, cores, busy,
                                              view.pcpus_per_core,
                                              view.guest_pct, trial=True):
            return want, None, (), None
        self.yielded(now, cores - 1, busy, [g.uuid for g in view.short])
        return cores - 1, YIELD_TO_SHORT, tuple(
            reason.of(SHORT_GUEST, vm=g.uuid, pcu=100.0 * g.pcu)
            for g in eligible), frozenset(g.uuid for g in eligible)

    def _yield_to_probe(self, view):
        """(guest, why) of a pool core given to a denied probe, or (None, ()).

        On a full host a probe up takes only idle cores, so a pool inside
        its utilization band holds the core a guest's probe needs. The
        pool yields one when it projects under ``emulator_util_overload``
        one core smaller (:meth:`may_yield`), to the denied probe whose
        guest's utilization per CPU is highest: the probe was confirmed
        before it was denied, so it goes ahead on this tick, and its
        trial judges the core (:meth:`_take_back_from_probe`). Only when
        the freed core would be the probe's, not the idle pool's floor.
        """
        if view.room < 0 or not view.probes:
            return None, ()
        if not self.may_yield(view.now, view.cores, view.busy_pct,
                              view.pcpus_per_core, view.guest_pct):
            return None, ()
        best = min(view.probes, key=lambda p: (-p.pcu, p.uuid))
        self.yielded(view.now, view.cores - 1, view.busy_pct, ())
        self._probe_yield = _ProbeYield(best.uuid, best.cores,
                                        view.cores - 1)
        return best.uuid, (reason.of(DENIED_PROBE, vm=best.uuid,
                                     target=best.target,
                                     pcu=100.0 * best.pcu),)

    def _take_back_from_probe(self, view, want):
        """Pool size once a probe the pool yielded to has ended.

        A probe that was not kept leaves the yielded core idle: the pool
        takes it back, to the size it held before the yield. One that was
        kept leaves the pool at the smaller size (:meth:`holds_yield`).
        """
        if self._probe_yield is None:
            return want
        given = self._probe_yield
        count, size = given.cores, given.size
        guest = view.active.get(given.vm)
        live = size == view.cores and guest is not None
        if live and guest.probing:
            return want         # still probing
        self._probe_yield = None
        if live and guest.cores > count:
            return want         # kept
        if size == view.cores and view.room > 0:
            return view.cores + 1   # not more: that would take guests' cores
        return want
