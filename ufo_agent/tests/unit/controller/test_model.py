"""Algorithm 2: samples, quadratic fits, refits, ageing and Pred."""

import hypothesis
from hypothesis import strategies as st
import pytest

from ufo_agent.controller import ControllerConfig
from ufo_agent.controller import quadfit
from ufo_agent.controller import sfmodel


def _curve(u):
    return -0.5 * u * u + 300.0 * u + 1000.0


def test_quadratic_fit_recovers_coefficients_and_r2():
    points = [(u, _curve(u)) for u in (10.0, 80.0, 150.0, 220.0, 300.0)]
    fit = quadfit.fit(points)
    for u in (0.0, 55.0, 299.0):
        assert fit(u) == pytest.approx(_curve(u), rel=1e-9)
    assert fit.r2 == pytest.approx(1.0)
    assert fit.slope(300.0) == pytest.approx(0.0, abs=1e-6)


def test_quadratic_fit_needs_three_distinct_points():
    assert quadfit.fit([(1.0, 2.0), (1.0, 3.0), (2.0, 4.0)]) is None
    noisy = quadfit.fit([(0.0, 0.0), (1.0, 5.0), (2.0, 0.0), (3.0, 5.0)])
    assert noisy is not None and noisy.r2 < 0.5


def _model(**kw):
    config = ControllerConfig(**kw)
    return sfmodel.SchedFreqModel(config, max_cores=4, pcpus_per_core=2)


def test_fits_on_the_third_distinct_sample_and_keeps_the_last_eight():
    model = _model()
    assert not model.update(2, 100.0, _curve(100.0), now=0)
    assert not model.update(2, 100.4, _curve(100.4), now=1)  # same bucket
    assert not model.update(2, 150.0, _curve(150.0), now=2)
    assert 2 not in model.models
    assert model.update(2, 200.0, _curve(200.0), now=3)
    assert model.models[2].points == 3
    for i in range(10):
        model.update(2, 210.0 + 10 * i, _curve(210.0 + 10 * i), now=4 + i)
    assert model.sample_count(2) == 8
    kept = sorted(s.util for s in model.samples[2].values())
    assert kept[0] == 230.0     # the oldest ones aged out of the window


def test_refits_when_recorded_or_fitted_value_is_off_by_five_percent():
    model = _model()
    for i, u in enumerate((100.0, 150.0, 200.0)):
        model.update(2, u, _curve(u), now=i)
    first = model.models[2]
    # Within 5% of the curve: no refit.
    assert not model.update(2, 250.0, _curve(250.0) * 1.04, now=3)
    assert model.models[2] is first
    # Off by 10% from the fit: refit.
    assert model.update(2, 175.0, _curve(175.0) * 1.10, now=4)
    assert model.models[2] is not first
    # A recorded utilization whose SF changed by >5%: refit with the new one.
    second = model.models[2]
    assert model.update(2, 100.0, _curve(100.0) * 0.8, now=5)
    assert model.models[2] is not second
    assert model.sf_at(2, 100.0) == pytest.approx(_curve(100.0) * 0.8)


def test_old_samples_age_out_so_a_new_workload_is_relearned():
    model = _model(sample_max_age=60.0)
    for i, u in enumerate((100.0, 150.0, 200.0)):
        model.update(2, u, _curve(u), now=i)
    assert 2 in model.models
    model.update(3, 100.0, 5.0, now=100.0)
    assert 2 not in model.models and model.sample_count(2) == 0
    assert model.sf_at(2, 150.0) is None


def test_sf_lookup_prefers_recorded_samples_within_a_tolerance():
    model = _model()
    model.update(1, 100.0, 7000.0, now=0)
    assert model.sf_at(1, 100.0) == 7000.0
    assert model.sf_at(1, 104.0) == 7000.0      # next bucket
    assert model.sf_at(1, 115.0) == 7000.0      # 15 % of 115 is 17.25
    assert model.sf_at(1, 120.0) is None        # 15 % of 120 is 18
    assert model.sf_at(2, 100.0) is None
    # At low utilization the floor is one and a half buckets.
    model.update(1, 10.0, 900.0, now=1)
    assert model.sf_at(1, 17.0) == 900.0
    assert model.sf_at(1, 18.0) is None


def test_the_same_load_on_a_busier_core_count_is_recognised():
    # 300 % at 3 cores is 340 % at 2 (13 % more): a sample recorded at 2
    # cores answers for the origin's 300 %; one bucket's width did not.
    model = _model()
    model.update(2, 340.0, 4800.0, now=0)
    assert model.sf_at(2, 300.0) == 4800.0


def _teach(model, cores, fn, utils):
    for i, u in enumerate(utils):
        model.update(cores, u, fn(u), now=float(i))


def _sf_on(pcpus):
    """An LC-like SF curve on ``pcpus`` pCPUs."""
    return lambda u: 2000.0 * u * (1.0 - min(u / (100.0 * pcpus), 1) ** 2)


def _taught_one_and_two_cores():
    model = _model()
    utils = [20.0, 40.0, 60.0, 80.0, 100.0, 120.0, 140.0]
    _teach(model, 1, _sf_on(2), utils)
    _teach(model, 2, _sf_on(4), utils)
    return model


def test_pred_is_the_highest_util_where_sf_ratio_holds():
    model = _taught_one_and_two_cores()
    sf_on = _sf_on
    pred = model.pred_of(1)
    assert pred is not None and model.pred_is_limit(1)
    # Analytically SF(2 pCPUs)/SF(4 pCPUs) = 0.7 at u ~ 116%.
    ratio = sf_on(2)(pred) / sf_on(4)(pred)
    assert ratio >= 0.7 - 0.02
    nxt = pred + model.config.util_resolution
    assert sf_on(2)(nxt) / sf_on(4)(nxt) < 0.7 + 0.02
    assert model.direct_prediction(pred - 10.0) == 1
    # Above Pred(1), two cores: Pred(2) is unknown but 2 is the flavor's
    # largest count only if max_cores were 2; here it is not.
    assert model.direct_prediction(pred + 10.0) is None


def test_pred_caps_at_pcu_high_and_top_count_takes_the_rest():
    config = ControllerConfig()
    model = sfmodel.SchedFreqModel(config, max_cores=2, pcpus_per_core=2)
    flat = (lambda u: 1000.0 + u)
    utils = [20.0, 60.0, 100.0, 140.0, 180.0, 220.0]
    _teach(model, 1, flat, utils)
    _teach(model, 2, flat, utils)
    assert model.pred_of(1) == pytest.approx(0.8 * 200.0)
    assert model.direct_prediction(100.0) == 1
    assert model.direct_prediction(170.0) == 2   # Pred(2) is unbounded


def test_pred_does_not_extrapolate_beyond_the_data():
    model = _model()
    _teach(model, 1, lambda u: 5000.0 + u, [100.0, 110.0, 120.0])
    _teach(model, 2, lambda u: 5000.0 + u, [300.0, 310.0, 320.0])
    assert model.pred_of(1) is None


def test_threshold_change_rebuilds_pred():
    model = _taught_one_and_two_cores()
    loose = model.pred_of(1)
    model.set_threshold(0.15)
    assert model.ratio_min == pytest.approx(0.85)
    assert model.pred_of(1) < loose


class _FullScanModel(sfmodel.SchedFreqModel):
    """The model without its shortcuts: every update walks every sample."""

    def update(self, cores, util, sf, now):
        self._oldest = -float('inf')
        self._spans = {c: sfmodel._span(s) for c, s in self.samples.items()}
        return super().update(cores, util, sf, now)


def _state(model):
    return ({c: [(k, r.util, r.sf, r.time) for k, r in s.items()]
             for c, s in model.samples.items()},
            {c: (m.a, m.b, m.c, m.r2, m.points)
             for c, m in model.models.items()},
            dict(model.pred))


@hypothesis.settings(max_examples=200, deadline=None)
@hypothesis.given(st.lists(st.tuples(
    st.integers(1, 4), st.floats(1.0, 790.0), st.floats(0.5, 1.5),
    st.sampled_from([0.0, 1.0, 1.0, 1.0, 250.0, 700.0]),
    st.booleans()), min_size=1, max_size=60))
def test_the_update_shortcuts_change_nothing_it_learns(steps):
    # update() skips the ageing walk while no sample can be stale and
    # keeps each count's utilization span instead of recomputing it; a
    # model that recomputes everything must learn exactly the same.
    config = ControllerConfig(sample_max_age=600.0)
    fast = sfmodel.SchedFreqModel(config, max_cores=4, pcpus_per_core=2)
    full = _FullScanModel(config, max_cores=4, pcpus_per_core=2)
    now = 0.0
    for cores, util, noise, gap, reload in steps:
        now += gap
        sf = max(1.0, _curve(util) * noise)
        assert fast.update(cores, util, sf, now) == \
            full.update(cores, util, sf, now)
        assert _state(fast) == _state(full)
        assert fast._spans == {c: sfmodel._span(s)
                               for c, s in fast.samples.items()}
        assert all(r.time >= fast._oldest for s in fast.samples.values()
                   for r in s.values())
        if reload:
            # A restart restores the same state into both.
            data = fast.export(now)
            fast.restore(data, now)
            full.restore(data, now)
            assert _state(fast) == _state(full)
