"""Per-VM model of scheduling frequency versus utilization (Algorithm 2).

For every core count ``c`` the model keeps the latest (util, sf) samples,
fits a quadratic once enough distinct utilizations exist, and keeps the
paper's ``Pred`` table: ``pred(c)`` is the highest utilization that ``c``
cores sustain, i.e. where SF(c, u) / SF(c + 1, u) is still at least
``1 - threshold``.

Core counts here are physical cores (allocation units), not pCPUs: with
SMT the paper's "c + 2 pCPUs" is "c + 1 cores".
"""

import collections
import dataclasses
import math

from ufo_agent.controller import quadfit

_EPS = 1e-9
# How far, in utilization buckets, Pred may look above the data of both
# curves.
_OVERLAP_SLACK = 4
# Points scanned per Pred computation; bounds the cost of one refit.
_PRED_GRID = 64


@dataclasses.dataclass
class Recorded:
    util: float
    sf: float
    time: float


class SchedFreqModel:
    """Samples, fitted curves and the Pred table of one VM."""

    def __init__(self, config, max_cores, pcpus_per_core, threshold=None):
        self.config = config
        self.max_cores = max_cores
        self.pcpus_per_core = pcpus_per_core
        self.threshold = (config.sf_threshold if threshold is None
                          else threshold)
        self.samples = {}   # cores -> OrderedDict(bucket -> Recorded)
        self.models = {}    # cores -> quadfit.Quadratic
        self.pred = {}      # cores -> max sustainable util (Pred table)
        # Kept so that a tick's update() need not walk every sample:
        # no sample is older than _oldest; _spans[c] is _span(samples[c]).
        self._oldest = math.inf
        self._spans = {}

    @property
    def ratio_min(self):
        """Smallest SF(c)/SF(c+1) at which c cores are enough."""
        return 1.0 - self.threshold

    def bucket(self, util):
        return int(round(util / self.config.util_resolution))

    def tolerance(self, util):
        """How far (utilization points) a sample may be and still count.

        One and a half buckets, or ``sf_match_tolerance`` of ``util`` if
        more: the same load shows 7-15 % more utilization on one core
        fewer (SMT siblings, busier cores), so a fixed width misses
        samples of the same load at high utilization.
        """
        return max(1.5 * self.config.util_resolution,
                   self.config.sf_match_tolerance * util)

    # -- Algorithm 2 -----------------------------------------------------
    def update(self, cores, util, sf, now):
        """Record one settled sample taken under ``cores``.

        Returns True when the fitted model of ``cores`` changed.
        """
        self.expire(now)
        store = self.samples.setdefault(cores, collections.OrderedDict())
        key = self.bucket(util)
        span = self._spans.get(cores)
        old = store.pop(key, None)
        store[key] = Recorded(util, sf, now)
        self._oldest = min(self._oldest, now)
        dropped = [] if old is None else [old.util]
        while len(store) > self.config.samples_per_model:
            dropped.append(store.popitem(last=False)[1].util)
        if span is not None and all(span[0] < u < span[1] for u in dropped):
            self._spans[cores] = (min(span[0], util), max(span[1], util))
        else:
            self._spans[cores] = _span(store)
        model = self.models.get(cores)
        if model is None:
            if len(store) >= self.config.min_samples_to_fit:
                return self._refit(cores)
            return False
        denom = max(abs(sf), _EPS)
        err = self.config.refit_error
        if ((old is not None and abs(sf - old.sf) / denom > err)
                or abs(sf - model(util)) / denom > err):
            return self._refit(cores)
        if self._spans[cores] != span:
            # Pred looks only where there is data; the data moved.
            self._update_pred_around(cores)
        return False

    def expire(self, now):
        """Forget samples older than sample_max_age (workload churn)."""
        horizon = now - self.config.sample_max_age
        if self._oldest >= horizon:
            return
        self._oldest = math.inf
        for cores in list(self.samples):
            store = self.samples[cores]
            stale = [k for k, s in store.items() if s.time < horizon]
            if store and len(stale) < len(store):
                self._oldest = min(self._oldest, min(
                    s.time for s in store.values() if s.time >= horizon))
            if not stale:
                continue
            for key in stale:
                del store[key]
            self._spans[cores] = _span(store)
            if not store:
                del self.samples[cores]
                del self._spans[cores]
            if len(store) < self.config.min_samples_to_fit:
                if self.models.pop(cores, None) is not None:
                    self._update_pred_around(cores)
            else:
                self._refit(cores)

    def set_threshold(self, threshold):
        """Change the SF threshold (MySQL-like VMs) and rebuild Pred."""
        if threshold != self.threshold:
            self.threshold = threshold
            for cores in range(1, self.max_cores + 1):
                self._update_pred(cores)

    def _refit(self, cores):
        points = [(s.util, s.sf) for s in self.samples[cores].values()]
        model = quadfit.fit(points)
        if model is None:
            changed = self.models.pop(cores, None) is not None
        else:
            self.models[cores] = model
            changed = True
        if changed:
            self._update_pred_around(cores)
        return changed

    # -- Pred table --------------------------------------------------------
    def _update_pred_around(self, cores):
        # Pred(c) depends on Model(c) and Model(c + 1).
        self._update_pred(cores - 1)
        self._update_pred(cores)

    def _update_pred(self, cores):
        if cores < 1 or cores >= self.max_cores:
            return
        lower, upper = self.models.get(cores), self.models.get(cores + 1)
        if lower is None or upper is None:
            self.pred.pop(cores, None)
            return
        # Scan where both curves have data (plus a little): an extrapolated
        # quadratic says nothing about QoS. No step may push PCU over
        # pcu_high, so neither may Pred.
        res = self.config.util_resolution
        spans = [[s.util for s in self.samples[c].values()]
                 for c in (cores, cores + 1)]
        cap = self.config.pcu_high * 100.0 * cores * self.pcpus_per_core
        low = max(min(span) for span in spans)
        top = min(max(span) for span in spans) + _OVERLAP_SLACK * res
        if top >= cap:
            top, exact = cap, True
        else:
            exact = False
        if low > top:
            self.pred.pop(cores, None)
            return
        step = max(res, (top - low) / _PRED_GRID)
        ratio_min = self.ratio_min
        best, util = None, low
        while True:
            f_up = upper(util)
            if f_up <= _EPS or lower(util) / f_up < ratio_min:
                exact = True
                break
            best = util
            if util >= top:
                break
            util = min(util + step, top)
        if best is None:
            # Fails already where data starts: what c cores sustain lies
            # below anything seen, so say nothing.
            self.pred.pop(cores, None)
            return
        self.pred[cores] = (best, exact)

    def pred_of(self, cores):
        """Pred(c), or None if not known.

        Pred(0) is 0 and Pred(max) is unbounded once Pred(max - 1) is known.
        """
        if cores == 0:
            return 0.0
        if cores >= self.max_cores:
            if cores == 1 or (cores - 1) in self.pred:
                return float('inf')
            return None
        entry = self.pred.get(cores)
        return None if entry is None else entry[0]

    def pred_is_limit(self, cores):
        """True if more than Pred(c) is known to need more than c cores.

        That is, the SF ratio crossed or PCU would pass pcu_high; False if
        the scan only ran out of data.
        """
        if cores == 0:
            return True
        entry = self.pred.get(cores)
        return entry is not None and entry[1]

    # -- Queries -------------------------------------------------------------
    def direct_prediction(self, util):
        """Algorithm 3's table lookup: the c with Pred(c-1) < u <= Pred(c).

        Pred(c-1) < u only proves c - 1 cores too few when Pred(c-1) is a
        real limit, not the end of the data.
        """
        if not self.pred and self.max_cores > 1:
            return None     # no bound known: what the loop would find
        for cores in range(1, self.max_cores + 1):
            low, high = self.pred_of(cores - 1), self.pred_of(cores)
            if low is None or high is None:
                continue
            if low < util <= high and self.pred_is_limit(cores - 1):
                return cores
        return None

    def sf_at(self, cores, util):
        """Algorithm 4 without the probe: a recorded or fitted SF, or None.

        A sample within :meth:`tolerance` counts as recorded: utilization
        is noisy and shifts with the core count, and an exact-bucket rule
        makes a controller probe the same count again and again under a
        constant load.
        """
        value = self.sf_evidence(cores, util)
        if value is not None:
            return value
        model = self.models.get(cores)
        return model(util) if model is not None else None

    def sf_evidence(self, cores, util):
        """SF at ``cores`` for ``util`` from data near ``util``, or None.

        A recorded sample within :meth:`tolerance`, or the fitted curve
        where its samples reach (plus the slack Pred uses): unlike
        :meth:`sf_at`, never a quadratic extrapolated far from the data.
        """
        store = self.samples.get(cores)
        if not store:
            return None
        sample = nearest(store, util, self.tolerance(util))
        if sample is not None:
            return sample.sf
        model = self.models.get(cores)
        if model is None:
            return None
        utils = [s.util for s in store.values()]
        slack = _OVERLAP_SLACK * self.config.util_resolution
        if min(utils) - slack <= util <= max(utils) + slack:
            return model(util)
        return None

    # -- Persistence ---------------------------------------------------------
    def export(self, now):
        """The samples as plain data; times become ages at ``now``."""
        return {
            'threshold': self.threshold,
            'samples': {str(cores): [[r.util, r.sf, max(0.0, now - r.time)]
                                     for r in store.values()]
                        for cores, store in self.samples.items() if store},
            'models': {str(cores): [m.a, m.b, m.c, m.r2, m.points]
                       for cores, m in self.models.items()},
        }

    def restore(self, data, now):
        """Load :meth:`export` output; curves and Pred are rebuilt from it.

        Fitted curves are taken as saved when they belong to samples that
        are still there, so a restart does not change a decision. Raises
        ValueError on anything malformed, leaving the model empty.
        """
        self.samples, self.models, self.pred = {}, {}, {}
        self._spans, self._oldest = {}, math.inf
        try:
            threshold = float(data.get('threshold', self.threshold))
            if not 0.0 < threshold < 1.0:
                raise ValueError('threshold %r out of range' % threshold)
            restored = {}
            for key, rows in dict(data['samples']).items():
                cores = int(key)
                if not 1 <= cores <= self.max_cores:
                    raise ValueError('core count %d out of range' % cores)
                store = collections.OrderedDict()
                keep = self.config.samples_per_model
                for util, sf, age in list(rows)[-keep:]:
                    util, sf, age = float(util), float(sf), float(age)
                    if not all(math.isfinite(v) and v >= 0.0
                               for v in (util, sf, age)):
                        raise ValueError('bad sample %r' % ([util, sf, age],))
                    store[self.bucket(util)] = Recorded(util, sf, now - age)
                restored[cores] = store
            curves = {}
            for key, row in dict(data.get('models', {})).items():
                a, b, c, r2, points = (float(v) for v in row)
                if not all(math.isfinite(v) for v in (a, b, c, r2)):
                    raise ValueError('bad curve %r' % (row,))
                curves[int(key)] = quadfit.Quadratic(a, b, c, r2,
                                                     int(points))
        except (KeyError, TypeError, AttributeError, OverflowError) as exc:
            # OverflowError: an integer too large for a float.
            raise ValueError('malformed model state: %s' % exc)
        self.threshold = threshold
        self.samples = restored
        self._spans = {cores: _span(store)
                       for cores, store in restored.items()}
        self._oldest = -math.inf
        self.expire(now)
        for cores in sorted(self.samples):
            if len(self.samples[cores]) < self.config.min_samples_to_fit:
                continue
            if cores in curves:
                self.models[cores] = curves[cores]
            else:
                self._refit(cores)
        for cores in range(1, self.max_cores):
            self._update_pred(cores)

    def sample_count(self, cores):
        return len(self.samples.get(cores, ()))

    def fitted(self):
        """{cores: Quadratic} of every fitted model."""
        return dict(self.models)


def nearest(store, util, tolerance):
    """The entry of ``store`` whose utilization is closest to ``util``.

    Only within ``tolerance`` (utilization points) of it; None otherwise.
    """
    best = None
    for sample in store.values():
        gap = abs(sample.util - util)
        if gap <= tolerance and (best is None or
                                 gap < abs(best.util - util)):
            best = sample
    return best


def _span(store):
    if not store:
        return None
    utils = [s.util for s in store.values()]
    return min(utils), max(utils)
