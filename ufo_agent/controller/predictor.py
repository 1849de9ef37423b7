"""The core predictor (Algorithm 3), with trials as decisions (Algorithm 4).

The paper's ``getSF`` moves a VM to ``c`` cores and sleeps three seconds
when it has neither a recorded sample nor a fitted model for ``c``. A
controller that serves every VM in one loop cannot sleep, so here a
missing SF stops the walk with "probe c cores". The controller moves the
VM, lets it settle, records the SF measured there in the :class:`Trial`,
and runs the same walk again from the same origin. The walk is
deterministic and every probe adds one known value, so it ends.

Per-core utilization (PCU) bounds the walk, as paper section 4.5
describes: a VM above ``pcu_high`` grows without asking SF (its SF says
little while it is saturated), and no step down is taken if PCU after it
would exceed ``pcu_high`` (it would be grown back at once). The lower
bound, no step up if PCU after it would fall below ``pcu_low``, applies
only where there is no SF evidence ("when models are not completely
fitted"): where SF at both counts is known from data near this
utilization (this trial's probes, recorded samples, or a fitted curve
inside its data), the SF ratio decides. PCU is computed on the larger of
the origin's and the current utilization, the current one discounted by
``sf_match_tolerance`` below the origin (see :meth:`Predictor.predict`).
Under ``pcu_low`` on the smaller of two counts SF decides nothing, data or
not: no request queues there, and SF falls on fewer CPUs only because the
guest's threads hand work to each other without the idle task between
them (doc/source/controller.rst).
"""

import dataclasses

from ufo_agent.controller.plan import Action
from ufo_agent.controller import reason

_EPS = 1e-9

# The rules of the walk and the Pred lookup (controller.rst).
NO_SF_HERE = reason.rule('no-sf-here', 'no SF at current count')
SF_UNKNOWN = reason.rule(
    'sf-unknown', 'SF unknown at %(cores)d cores for util %(util).0f%%')
PRED_HYSTERESIS = reason.rule(
    'pred-hysteresis',
    'util %(util).0f%% within one bucket of Pred(%(cores)d)')
PRED = reason.rule('pred', 'Pred: %(cores)d cores sustain util %(util).0f%%')
FLAVOR_MAX = reason.rule('flavor-max', 'at flavor maximum (%(cores)d cores)')
PCU_HIGH = reason.rule(
    'pcu-high', 'PCU %(pcu).0f%% > %(limit).0f%% at %(cores)d cores')
TOO_LIGHT = reason.rule(
    'too-light', 'PCU %(pcu).0f%% < %(limit).0f%% at %(cores)d cores: '
    'too light to queue')
PCU_LOW = reason.rule(
    'pcu-low', 'PCU %(pcu).0f%% < %(limit).0f%% at %(cores)d cores')
SF_DROP = reason.rule(
    'sf-drop', 'SF(%(low)d)/SF(%(high)d) = %(ratio).2f < %(ratio_min).2f')
SF_FLAT = reason.rule(
    'sf-flat', 'SF(%(low)d)/SF(%(high)d) = %(ratio).2f >= %(ratio_min).2f')
SF_DROP_BELOW = reason.rule(
    'sf-drop-below',
    'SF(%(low)d)/SF(%(high)d) = %(ratio).2f <= %(ratio_min).2f')
SF_TO_ONE = reason.rule('sf-to-one', 'SF holds down to one core')
THEN = reason.rule('then', 'then %(reason)s')


@dataclasses.dataclass
class Trial:
    """An ongoing search: SF measured at each core count under one load."""

    origin_cores: int
    origin_util: float
    started: float
    sf: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Prediction:
    """What the predictor wants for a VM this tick.

    ``action`` is a :class:`~ufo_agent.controller.plan.Action`: ``stay``,
    ``grow``, ``shrink``, ``probe``, ``revert`` or ``accept``; ``reason``
    a :class:`~ufo_agent.controller.reason.Reason`.
    """

    cores: int
    action: Action
    reason: reason.Reason
    trial: Trial = None
    committed: int = None

    def __post_init__(self):
        if self.committed is None:
            object.__setattr__(self, 'committed', self.cores)

    @property
    def speculative(self):
        """True if only idle cores may serve this (a probe upward)."""
        return self.cores > self.committed


class _NeedProbe(Exception):
    """The walk needs SF at ``cores``; it has proved ``floor`` needed."""

    def __init__(self, cores, floor):
        super().__init__(cores)
        self.cores = cores
        self.floor = floor
        self.why = None


class _SfLookup:
    """SF at a core count for one walk's origin utilization.

    From this trial's probes first; :meth:`ratio` then takes recorded or
    fitted values and SF remembered from earlier trials, and raises
    _NeedProbe where none exists; :meth:`evidence` takes only data near
    the utilization (:meth:`~ufo_agent.controller.sfmodel.SchedFreqModel.
    sf_evidence`) and returns None where it is missing.
    """

    def __init__(self, model, trial, util, probe_sf):
        self.model = model
        self.measured = trial.sf if trial is not None else {}
        self.util = util
        self.probe_sf = probe_sf

    def _sf(self, cores, floor):
        if cores in self.measured:
            return self.measured[cores]
        value = self.model.sf_at(cores, self.util)
        if value is None and self.probe_sf is not None:
            value = self.probe_sf(cores, self.util)
        if value is None:
            raise _NeedProbe(cores, floor)
        return value

    def ratio(self, low, high, floor):
        return self._sf(low, floor) / max(self._sf(high, floor), _EPS)

    def evidence(self, low, high):
        values = [self.measured[c] if c in self.measured
                  else self.model.sf_evidence(c, self.util)
                  for c in (low, high)]
        if None in values:
            return None
        return values[0] / max(values[1], _EPS)


class Predictor:
    """Algorithm 3 for one VM; holds no state between calls."""

    def __init__(self, config, max_cores, pcpus_per_core):
        self.config = config
        self.max_cores = max_cores
        self.pcpus_per_core = pcpus_per_core

    def pcu(self, util, cores):
        """Per-core utilization (fraction) if ``util`` ran on ``cores``."""
        return util / (100.0 * cores * self.pcpus_per_core)

    def too_light(self, util, cores):
        """True if no request would queue on ``cores``: SF there says nothing.

        Under ``pcu_low``, SF falls on fewer CPUs only because the guest's
        threads hand work over without the idle task (module docstring).
        """
        return self.pcu(util, cores) < self.config.pcu_low

    def predict(self, model, cores, util, now, trial=None, probe_sf=None):
        """Return a :class:`Prediction` for a VM now on ``cores`` cores.

        ``util`` is the settled utilization measured on ``cores``;
        ``probe_sf(cores, util)`` looks up SF values remembered from
        earlier trials at that origin utilization.
        """
        if trial is None:
            direct = self._direct(model, cores, util)
            if direct is not None:
                return direct
        origin_cores = trial.origin_cores if trial else cores
        origin_util = trial.origin_util if trial else util
        # The larger of the two is the better estimate of demand: the
        # origin may have been saturated, and load may have risen since.
        # Below the origin the same work shows up to sf_match_tolerance
        # more utilization on fewer, busier cores: that much is not demand.
        if cores < origin_cores:
            util = util / (1.0 + self.config.sf_match_tolerance)
        util_for_pcu = max(origin_util, util)

        lookup = _SfLookup(model, trial, origin_util, probe_sf)
        try:
            target, why = self._walk(origin_cores, util_for_pcu, model,
                                     lookup.ratio, lookup.evidence)
        except _NeedProbe as probe:
            if probe.cores == cores:    # cannot happen: measured just now
                return Prediction(cores, Action.STAY,
                                  reason.of(NO_SF_HERE))
            if trial is None:
                trial = Trial(origin_cores, origin_util, now)
            why = reason.of(SF_UNKNOWN, cores=probe.cores, util=origin_util)
            if probe.why:
                why = why.before_all(probe.why)
            floor = min(probe.floor, probe.cores)
            if floor > cores:
                # The walk has already proved these cores needed.
                return Prediction(probe.cores, Action.GROW, why, trial,
                                  floor)
            return Prediction(probe.cores, Action.PROBE, why, trial,
                              min(floor, cores) if probe.cores > cores
                              else probe.cores)
        if trial is None:
            if target == cores:
                return Prediction(cores, Action.STAY, why)
            action = Action.GROW if target > cores else Action.SHRINK
            return Prediction(target, action, why)
        if target == cores:
            return Prediction(cores, Action.ACCEPT, why)
        if target == trial.origin_cores or target in trial.sf:
            return Prediction(target, Action.REVERT, why)
        return Prediction(target,
                          Action.GROW if target > cores else Action.SHRINK,
                          why)

    def _direct(self, model, cores, util):
        """The Pred table lookup, with one bucket of hysteresis downward."""
        target = model.direct_prediction(util)
        if target is None:
            return None
        if target > 1 and target >= cores and \
                self.too_light(util, target - 1):
            # A handoff's SF drop set Pred(target - 1), not a queue's: it
            # neither grows the VM nor holds it there. Walk.
            return None
        if target < cores and not self.too_light(util, target):
            # Leave c cores only when u is clearly below what c - 1 sustain
            # (no band where nothing would queue on c - 1).
            if util > model.pred_of(target) - self.config.util_resolution:
                return Prediction(cores, Action.STAY, reason.of(
                    PRED_HYSTERESIS, util=util, cores=target))
        if target == cores:
            return Prediction(cores, Action.STAY,
                              reason.of(PRED, cores=cores, util=util))
        action = Action.GROW if target > cores else Action.SHRINK
        return Prediction(target, action,
                          reason.of(PRED, cores=target, util=util))

    def _walk(self, start, util, model, ratio, evidence):
        """Algorithm 3's two loops; raises _NeedProbe for a missing SF.

        ``evidence(low, high)`` is SF(low)/SF(high) from data, or None:
        where it exists the PCU band does not apply.
        """
        cfg = self.config
        ratio_min = model.ratio_min

        def more_needed(p):
            if p >= self.max_cores:
                return False, reason.of(FLAVOR_MAX, cores=p)
            if self.pcu(util, p) > cfg.pcu_high:
                return True, reason.of(PCU_HIGH, pcu=100 * self.pcu(util, p),
                                       limit=100 * cfg.pcu_high, cores=p)
            if self.too_light(util, p):
                return False, reason.of(
                    TOO_LIGHT, pcu=100 * self.pcu(util, p),
                    limit=100 * cfg.pcu_low, cores=p)
            r = evidence(p, p + 1)
            if r is None:
                if self.pcu(util, p + 1) < cfg.pcu_low:
                    return False, reason.of(
                        PCU_LOW, pcu=100 * self.pcu(util, p + 1),
                        limit=100 * cfg.pcu_low, cores=p + 1)
                r = ratio(p, p + 1, p)
            return r < ratio_min, reason.of(
                SF_DROP if r < ratio_min else SF_FLAT, low=p, high=p + 1,
                ratio=r, ratio_min=ratio_min)

        p = start
        grow, first = more_needed(p)
        if grow:
            try:
                why = first
                while grow:
                    p += 1
                    grow, why = more_needed(p)
            except _NeedProbe as probe:
                probe.why = first
                raise
            return p, _chain(first, why)
        while p > 1:
            # The grow rule's mirror: a step down into PCU above pcu_high
            # would be grown back at once.
            if self.pcu(util, p - 1) > cfg.pcu_high:
                return p, _chain(first, reason.of(
                    PCU_HIGH, pcu=100 * self.pcu(util, p - 1),
                    limit=100 * cfg.pcu_high, cores=p - 1))
            r = ratio(p - 1, p, p - 1)
            if r <= ratio_min and not self.too_light(util, p - 1):
                return p, _chain(first, reason.of(
                    SF_DROP_BELOW, low=p - 1, high=p, ratio=r,
                    ratio_min=ratio_min))
            p -= 1
        return p, _chain(first, reason.of(SF_TO_ONE))


def _chain(first, last):
    """``first``, then where the walk stopped (``last``) if another."""
    if first is last or str(first) == str(last):
        return first
    return first.after_all(reason.of(THEN, reason=last))
