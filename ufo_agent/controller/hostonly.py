"""Core count of a guest managed host-only, judged by steal.

A guest without the module (or one the agent does not trust) reports no
scheduling frequency and cannot take vCPUs offline: all of its vCPUs
share the cores it is given. What the host sees of its QoS is how long
those vCPU threads wait on a run queue while runnable (schedstat run
delay), as a share of their runnable time: *steal*, the guest's view of
the same wait. Eunomia (the "ST%" detector it compares with) and the
adaptive emulator-thread scheduler judge a black-box VM by it. What
more cores can cure is the steal above what the guest sees with a CPU
per vCPU (its *isolated* steal, from the host's other threads; Eunomia
likewise calibrates its detector in a core-isolated phase). A guest
starts at its flavor size, so its isolated steal is measured first.

A guest is *short* of cores when its excess steal is above
``host_only_steal_max``, or when its runnable demand (what ran plus what
waited) is more than that margin above the CPUs it has: its own vCPUs
then wait for each other, whatever the host's other threads do. Where
isolated steal is large (a small host where every thread shares every
CPU) the second test is what still tells a short guest from a noisy
host.

* Short: grow, at once to the cores its runnable demand would keep
  busy, and by at least one.
* Excess steal under half the limit: try one core fewer (a probe),
  unless that count was short at this load before. A probe that is
  short goes back and is remembered until utilization falls by
  ``sf_match_tolerance`` or ``sample_max_age`` passes; one that holds
  is kept. A count the guest had to grow from is remembered the same
  way, so a load that stays is not probed again every few seconds.

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
from ufo_agent.controller import reason


@dataclasses.dataclass(frozen=True)
class FailedShrink:
    """A count that stole too much, at a load, when."""

    cores: int
    util: float
    time: float


def _isolated_note(isolated):
    return ' + %.0f%% isolated' % isolated if isolated else ''


def _steal_text(template):
    """A rule's text with the isolated steal (if any) after the limit."""
    def render(values):
        return template % dict(values, base=_isolated_note(
            values['isolated']))
    return render


# The host-only rules (controller.rst); steal values are in percent.
STEAL_HIGH = reason.rule('steal-high', _steal_text(
    'steal %(steal).0f%% > %(limit).0f%%%(base)s at %(cores)d cores'))
RUNNABLE_HIGH = reason.rule(
    'runnable-high', 'runnable %(runnable).0f%% > %(cpus)d CPUs + '
    '%(limit).0f%% at %(cores)d cores')
STEAL_OK = reason.rule('steal-ok', _steal_text(
    'steal %(steal).0f%% <= %(limit).0f%%%(base)s at %(cores)d cores'))
AT_FLAVOR_MAX = reason.rule('at-flavor-max', 'at flavor maximum')
STEAL_STEADY = reason.rule('steal-steady', _steal_text(
    'steal %(steal).0f%%%(base)s at %(cores)d cores'))
SHORT_BEFORE = reason.rule(
    'short-before', '%(cores)d cores were short at util %(util).0f%%')
STEAL_LOW = reason.rule('steal-low', _steal_text(
    'steal %(steal).0f%% < %(limit).1f%%%(base)s at %(cores)d cores'))


class HostOnlyPredictor:
    """The rule above for one VM; the memory is kept by the caller."""

    def __init__(self, config, max_cores, pcpus_per_core, vcpus=None):
        self.config = config
        self.max_cores = max_cores
        self.pcpus_per_core = pcpus_per_core
        self.vcpus = vcpus or max_cores * pcpus_per_core

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

    def demand(self, util, steal):
        """Runnable time of its vCPUs, in percent of a CPU: at most all."""
        return min(100.0 * self.vcpus, util / max(1.0 - steal, 1e-3))

    def short(self, cores, util, steal, isolated=0.0):
        """Why the VM is short of cores at this sample, or None."""
        limit = self.config.host_only_steal_max
        if steal - isolated > limit:
            return reason.of(STEAL_HIGH, steal=100 * steal,
                             limit=100 * limit, isolated=100 * isolated,
                             cores=cores)
        cpus = min(self.vcpus, cores * self.pcpus_per_core)
        demand = self.demand(util, steal)
        if demand > 100.0 * cpus * (1.0 + limit):
            return reason.of(RUNNABLE_HIGH, runnable=demand, cpus=cpus,
                             limit=100 * limit, cores=cores)
        return None

    def predict(self, cores, util, steal, now, trial=None, failed=None,
                isolated=0.0):
        """Return (:class:`Prediction`, :class:`FailedShrink` or None).

        ``cores`` is where the VM has settled, ``util`` and ``steal`` its
        sample there; ``trial`` a probe under way, ``failed`` the last
        shrink that did not hold; ``isolated`` its steal when it last
        had a CPU per vCPU. The second value is what to remember.
        """
        limit = self.config.host_only_steal_max
        why = self.short(cores, util, steal, isolated)
        if trial is not None:
            if why:
                failed = FailedShrink(cores, trial.origin_util, now)
                return Prediction(trial.origin_cores, Action.REVERT,
                                  why), failed
            return Prediction(cores, Action.ACCEPT, reason.of(
                STEAL_OK, steal=100 * steal, limit=100 * limit,
                isolated=100 * isolated, cores=cores)), failed
        if why:
            if cores >= self.max_cores:
                return Prediction(cores, Action.STAY, why.after_all(
                    reason.of(AT_FLAVOR_MAX))), failed
            target = min(self.max_cores, max(
                cores + 1, self.cores_for(self.demand(util, steal))))
            # Short without a probe (the load rose, or a probe that held
            # at first): this count is remembered as a reverted one is.
            return Prediction(target, Action.GROW, why), FailedShrink(
                cores, util, now)
        if steal - isolated >= limit / 2 or cores <= 1:
            return Prediction(cores, Action.STAY, reason.of(
                STEAL_STEADY, steal=100 * steal, isolated=100 * isolated,
                cores=cores)), failed
        smaller = cores - 1
        if self.remembers(failed, smaller, util, now):
            return Prediction(cores, Action.STAY, reason.of(
                SHORT_BEFORE, cores=smaller, util=failed.util)), failed
        return Prediction(smaller, Action.PROBE, reason.of(
            STEAL_LOW, steal=100 * steal, limit=50 * limit,
            isolated=100 * isolated, cores=cores),
            Trial(cores, util, now)), failed
