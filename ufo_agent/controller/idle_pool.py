"""Size of the idle pool: its floor, and the cores its parked VMs wait for.

Parked VMs (under ``idle_util`` for ``idle_after``) run one vCPU each on
the idle pool, ``idle_pool_min_cores`` cores while any VM shares it.
At the paper's idle mark (1 %) they barely run and one core serves any
number of them. At a higher mark, which parks lightly loaded LC VMs,
the pool has real work: tens of vCPUs on two CPUs queue for them, and
every request of a parked LC VM pays that queue.

The host sees the queue as run delay of the parked VMs' vCPU threads.
The pool's *steal* is that delay as a share of their runnable time
(what they ran plus what they waited). Above ``idle_pool_steal_max``
on ``confirm_samples`` ticks in a row, the pool commits one core more
than it holds, once it holds what it committed; under half the limit
for a while, it gives one back. The while starts at ``idle_after`` and
doubles, up to ``idle_after_max``, each time a core given back is asked
for again within it. The pool never commits more cores than its parked
vCPUs fill. A pool that ran less than :data:`MIN_BUSY_PCT` of one CPU
has no steal worth reading: it counts as under the limit. 0, the
option's default, turns the rule off.

The extra cores are committed demand (:mod:`.allocator`): served after
the busy active VMs' committed cores, and counted short when the host
cannot serve them, so that a host whose parked VMs queue reports it is
full. Pure: the controller gives it one :class:`ParkedLoad` a tick.
"""

import math

from ufo_agent.controller import backoff
from ufo_agent.controller import reason
from ufo_agent import frozen

# Below this much work (% of one CPU), the parked VMs' steal is noise.
MIN_BUSY_PCT = 10.0

STEAL_HIGH = reason.rule('idle-steal-high', 'parked VMs steal '
                         '%(steal).0f%% > %(limit).0f%% on %(cores)d cores')
STEAL_LOW = reason.rule('idle-steal-low', 'parked VMs steal %(steal).1f%% '
                        '< %(limit).1f%% for %(seconds).0f s')
NONE_PARKED = reason.rule('idle-none-parked', 'no VM is parked')
OFF = reason.rule('idle-steal-off', 'idle_pool_steal_max is 0')
FEWER_PARKED = reason.rule('idle-fewer-parked', '%(parked)d parked VMs '
                           'fill %(cores)d idle cores')


@frozen.value
class ParkedLoad:
    """The parked VMs over one tick.

    ``busy_pct`` is what their vCPU threads ran and ``wait_pct`` what
    they waited for a host CPU, both in % of one CPU; ``vms`` how many
    are parked.
    """

    busy_pct: float
    wait_pct: float
    vms: int

    @property
    def steal(self):
        runnable = self.busy_pct + self.wait_pct
        if self.busy_pct < MIN_BUSY_PCT or runnable <= 0:
            return 0.0
        return self.wait_pct / runnable


class IdlePool:
    """Cores the idle pool commits above its floor (:attr:`extra`)."""

    def __init__(self, config, pcpus_per_core):
        self.config = config
        self.ppc = pcpus_per_core
        self.extra = 0
        self._over = 0                  # ticks in a row over the limit
        self._under_since = None        # under half the limit since
        self._changed_at = -math.inf
        self._shrunk_at = None
        self._wait = backoff.DoublingWait()   # before a shrink

    def decide(self, now, load, floor, cores):
        """Update :attr:`extra` from one tick's ``load``.

        ``floor`` is the pool's configured size while VMs share it,
        ``cores`` what it holds now (its floor, its extra cores if the
        host had them, and any core no other pool wanted). Returns (old
        extra, reason) when it changed, else None.
        """
        cfg = self.config
        old = self.extra
        cap = max(0, math.ceil(load.vms / self.ppc) - floor)
        if not cfg.idle_pool_steal_max or not load.vms:
            self.extra = self._over = 0
            self._under_since = None
            if not old:
                return None
            self._changed_at = now
            return old, reason.of(NONE_PARKED if load.vms == 0 else OFF)
        limit = cfg.idle_pool_steal_max
        steal = load.steal
        settled = now - self._changed_at >= cfg.settle_time
        if self._shrunk_at is not None and \
                now - self._shrunk_at >= cfg.idle_after_max:
            self._shrunk_at = None
            self._wait.reset()
        wait = self._wait.seconds(cfg)
        why = None
        if steal > limit:
            self._under_since = None
            self._over += 1
            # One core more than it holds, once it holds what it asked
            # for: a core the host lacks is a shortfall, not a reason
            # to ask for another.
            if self._over >= cfg.confirm_samples and settled and \
                    cores >= floor + self.extra and cores - floor < cap:
                if self._shrunk_at is not None and \
                        now - self._shrunk_at < wait:
                    self._wait.double(cfg)
                self.extra = cores - floor + 1
                self._over = 0
                why = reason.of(STEAL_HIGH, steal=100 * steal,
                                limit=100 * limit, cores=cores)
        else:
            self._over = 0
            if steal >= limit / 2:
                self._under_since = None
            elif self._under_since is None:
                self._under_since = now
            elif self.extra and settled and \
                    now - self._under_since >= wait:
                self.extra -= 1
                self._shrunk_at = now
                why = reason.of(STEAL_LOW, steal=100 * steal,
                                limit=50 * limit,
                                seconds=now - self._under_since)
                self._under_since = now
        if self.extra > cap:
            self.extra = cap
            why = reason.of(FEWER_PARKED, parked=load.vms,
                            cores=floor + cap)
        if self.extra == old:
            return None
        self._changed_at = now
        return old, why
