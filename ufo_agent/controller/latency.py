"""QoS-target mode: a VM's cores follow its own tail latency.

For a guest whose flavor sets a latency target and whose guest publishes
a fresh tail latency, this replaces the SF walk (Algorithm 3) with a
loop on the measured latency, one decision a settled sample:

* latency above the target: grow, to one core more or to what the
  demand needs at ``pcu_high``, whichever is more (``latency-violation``);
* latency below ``latency_slack`` times the target: try one core fewer
  (``latency-slack-trial``), unless the work would not fit on it
  (``latency-pcu-guard``);
* a trial whose latency goes above the target goes back
  (``latency-trial-revert``), before it settles too; one that holds is
  kept (``latency-trial-accept``);
* in between: stay (``latency-in-band``).

The controller runs these through its usual guards and confirmation
(doc/source/controller-qos-target.rst). The loop itself is pure: it
reads numbers and returns a :class:`~.predictor.Prediction`.
"""

import math

from ufo_agent.controller.plan import Action
from ufo_agent.controller import predictor
from ufo_agent.controller import reason
from ufo_agent import frozen

VIOLATION = reason.rule(
    'latency-violation', 'p%(percentile)g %(latency).0f us > target '
    '%(target).0f us: grow to %(cores)d cores')
FLAVOR_MAX = reason.rule(
    'latency-flavor-max', 'p%(percentile)g %(latency).0f us > target '
    '%(target).0f us at flavor maximum (%(cores)d cores)')
SLACK_TRIAL = reason.rule(
    'latency-slack-trial', 'p%(percentile)g %(latency).0f us < '
    '%(slack).2f x target %(target).0f us: try %(cores)d cores')
PCU_GUARD = reason.rule(
    'latency-pcu-guard', 'p%(percentile)g %(latency).0f us leaves slack, '
    'but util %(util).0f%% does not fit on %(cores)d cores')
TRIAL_REVERT = reason.rule(
    'latency-trial-revert', 'p%(percentile)g %(latency).0f us > target '
    '%(target).0f us on trial: back to %(cores)d cores')
TRIAL_ACCEPT = reason.rule(
    'latency-trial-accept', 'p%(percentile)g %(latency).0f us meets '
    'target %(target).0f us on %(cores)d cores')
IN_BAND = reason.rule(
    'latency-in-band', 'p%(percentile)g %(latency).0f us within '
    '%(slack).2f-1 x target %(target).0f us')
POOL_TRIAL = reason.rule(
    'latency-pool-wait', 'trial of %(cores)d cores waits: the emulator '
    'pool is on trial')
DRAIN_KEPT = reason.rule(
    'latency-drain-kept', 'p%(percentile)g %(latency).0f us > target '
    '%(target).0f us on the drain cores: %(cores)d cores a tick more')
STALE = reason.rule(
    'latency-stale', 'no fresh latency from the guest: black-box rules')


@frozen.value
class LatencyTrial:
    """A trial from ``origin`` cores, which held ``committed`` of them."""

    origin: int
    committed: int
    started: float


class LatencyLoop:
    """The latency loop of one VM; holds no state between calls.

    Its trial (a :class:`LatencyTrial`) is the VM's, passed in.
    """

    def __init__(self, config, max_cores, pcpus_per_core, spec):
        self.config = config
        self.max_cores = max_cores
        self.pcpus_per_core = pcpus_per_core
        self.target = spec.latency_target_us
        self.percentile = spec.latency_percentile

    def cores_for(self, util, pcu):
        """Cores that run ``util`` (% of one CPU) at per-core ``pcu``."""
        return max(1, math.ceil(
            util / (100.0 * self.pcpus_per_core * pcu) - 1e-9))

    def revert(self, cores, latency, trial, util):
        """A :class:`Prediction` ending ``trial`` if it violates, or None.

        Asked on every sample, settled or not: a trial that costs the
        guest its target is not kept until it settles. The revert commits
        what the trial held committed, or what ``util`` keeps busy at
        ``pcu_high`` on up to the trial's origin, whichever is more, as a
        violation's grow does: a new VM's flavor-size cores were not yet
        committed when the trial left them.
        """
        if trial is None or latency <= self.target or cores >= trial.origin:
            return None
        committed = min(trial.origin, max(
            trial.committed, self.cores_for(util, self.config.pcu_high)))
        return predictor.Prediction(
            trial.origin, Action.REVERT,
            self._why(TRIAL_REVERT, latency, cores=trial.origin),
            committed=committed)

    def decide(self, cores, latency, util, demand, committed, now,
               trial=None):
        """A :class:`Prediction` from one settled sample on ``cores``.

        ``util`` is the measured utilization, ``demand`` what the guest
        would run with all its traffic answered; ``committed`` the cores
        the VM holds committed now; ``trial`` its trial, if any (settled
        within the target: :meth:`revert` ends it otherwise). A trial
        started rides on the prediction's ``trial``.
        """
        cfg = self.config
        target = self.target
        if trial is not None:
            return predictor.Prediction(
                cores, Action.ACCEPT,
                self._why(TRIAL_ACCEPT, latency, cores=cores))
        if latency > target:
            if cores >= self.max_cores:
                return predictor.Prediction(
                    cores, Action.STAY,
                    self._why(FLAVOR_MAX, latency, cores=cores))
            want = min(self.max_cores,
                       max(cores + 1, self.cores_for(demand, cfg.pcu_high)))
            return predictor.Prediction(
                want, Action.GROW,
                self._why(VIOLATION, latency, cores=want))
        if latency < cfg.latency_slack * target and cores > 1:
            if self.cores_for(util, 1.0) > cores - 1:
                return predictor.Prediction(
                    cores, Action.STAY,
                    self._why(PCU_GUARD, latency, util=util,
                              cores=cores - 1))
            return predictor.Prediction(
                cores - 1, Action.PROBE,
                self._why(SLACK_TRIAL, latency, slack=cfg.latency_slack,
                          cores=cores - 1),
                LatencyTrial(cores, committed, now))
        return predictor.Prediction(
            cores, Action.STAY,
            self._why(IN_BAND, latency, slack=cfg.latency_slack))

    def drain_kept(self, latency, cores):
        """The reason a grow's drain cores stay on ``cores``."""
        return self._why(DRAIN_KEPT, latency, cores=cores)

    def _why(self, rule, latency, **values):
        return reason.of(rule, percentile=self.percentile, latency=latency,
                         target=self.target, **values)
