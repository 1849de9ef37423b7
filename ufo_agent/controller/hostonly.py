"""Core count of a guest managed host-only, judged by steal.

A guest without the module (or one the agent does not trust) reports no
scheduling frequency and cannot take vCPUs offline: all of its vCPUs
share the cores it is given. What the host sees of its QoS is how long
those vCPU threads wait on a run queue while runnable (schedstat run
delay), as a share of their runnable time: *steal*, the guest's view of
the same wait. Eunomia (the "ST%" detector it compares with) and the
adaptive emulator-thread scheduler judge a black-box VM by it. Isolated
on as many CPUs as vCPUs, a guest steals next to nothing, so the rule
needs no learning: stay under ``host_only_steal_max``.

* Steal above the limit: grow, at once to the cores its runnable demand
  (what ran plus what waited) would keep busy, and by at least one.
* Steal under half the limit: try one core fewer (a probe), unless that
  count stole too much at this load before. A probe that steals more
  than the limit goes back and is remembered until utilization falls by
  ``sf_match_tolerance`` or ``sample_max_age`` passes; one that holds is
  kept.

Per-core utilization does not enter: what the host sees of a vCPU
thread includes KVM's halt polling, which is no demand (it stops the
moment anything else could run there), and a saturated guest on fewer
CPUs than vCPUs steals.
"""

import dataclasses
import math

from ufo_agent.controller.plan import Action
from ufo_agent.controller.predictor import Prediction
from ufo_agent.controller.predictor import Trial


@dataclasses.dataclass(frozen=True)
class FailedShrink:
    """A count that stole too much, at a load, when."""

    cores: int
    util: float
    time: float


class HostOnlyPredictor:
    """The rule above for one VM; the memory is kept by the caller."""

    def __init__(self, config, max_cores, pcpus_per_core):
        self.config = config
        self.max_cores = max_cores
        self.pcpus_per_core = pcpus_per_core

    def cores_for(self, demand):
        """The fewest cores that could run ``demand`` (percent of a CPU)."""
        return max(1, int(math.ceil(demand / (100.0 * self.pcpus_per_core)
                                    - 1e-9)))

    def remembers(self, failed, cores, util, now):
        """True if shrinking to ``cores`` failed at this load recently."""
        cfg = self.config
        return (failed is not None and failed.cores == cores and
                now - failed.time <= cfg.sample_max_age and
                util >= failed.util / (1.0 + cfg.sf_match_tolerance))

    def predict(self, cores, util, steal, now, trial=None, failed=None):
        """Return (:class:`Prediction`, :class:`FailedShrink` or None).

        ``cores`` is where the VM has settled, ``util`` and ``steal`` its
        sample there; ``trial`` a probe under way, ``failed`` the last
        shrink that did not hold. The second value is what to remember.
        """
        cfg = self.config
        limit = cfg.host_only_steal_max
        if trial is not None:
            if steal > limit:
                failed = FailedShrink(cores, trial.origin_util, now)
                return Prediction(
                    trial.origin_cores, Action.REVERT,
                    'steal %.0f%% > %.0f%% at %d cores' % (
                        100 * steal, 100 * limit, cores)), failed
            return Prediction(cores, Action.ACCEPT,
                              'steal %.0f%% <= %.0f%% at %d cores' % (
                                  100 * steal, 100 * limit, cores)), failed
        if steal > limit:
            why = 'steal %.0f%% > %.0f%% at %d cores' % (
                100 * steal, 100 * limit, cores)
            if cores >= self.max_cores:
                return Prediction(cores, Action.STAY, why + '; at flavor '
                                  'maximum'), failed
            demand = util / max(1.0 - steal, 1e-3)
            target = min(self.max_cores,
                         max(cores + 1, self.cores_for(demand)))
            return Prediction(target, Action.GROW, why), failed
        if steal >= limit / 2 or cores <= 1:
            return Prediction(cores, Action.STAY, 'steal %.0f%% at %d cores'
                              % (100 * steal, cores)), failed
        smaller = cores - 1
        if self.remembers(failed, smaller, util, now):
            return Prediction(cores, Action.STAY, '%d cores stole too much '
                              'at util %.0f%%' % (smaller, failed.util)
                              ), failed
        return Prediction(smaller, Action.PROBE, 'steal %.0f%% < %.1f%% at '
                          '%d cores' % (100 * steal, 50 * limit, cores),
                          Trial(cores, util, now)), failed
