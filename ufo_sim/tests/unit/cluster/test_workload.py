"""The synthetic cloud workload: its statistics are its parameters'."""

import cmath
import collections
import dataclasses
import math

import numpy as np
import pytest

from ufo_sim.cluster import workload

DAY = workload.DAY_S
BOTH = [pytest.param(workload.WorkloadParams(), id='default'),
        pytest.param(workload.held_out(), id='held-out')]


def _large(params, days=20, rate=400.0, seed=11):
    """Arrivals only (no warm start), many of them."""
    p = dataclasses.replace(params, arrivals_per_hour=rate)
    return p, workload.generate(p, seed, days * DAY, warm=False)


def _shares(values):
    counts = collections.Counter(values)
    return {k: n / len(values) for k, n in counts.items()}


def test_same_seed_same_workload_other_seed_another():
    p = workload.WorkloadParams()
    a = workload.generate(p, 3, 2 * DAY)
    assert a == workload.generate(p, 3, 2 * DAY)
    assert a != workload.generate(p, 4, 2 * DAY)
    assert [r.arrive_s for r in a] == sorted(r.arrive_s for r in a)
    assert len({r.vm_id for r in a}) == len(a)


def test_mean_arrival_rate():
    p, vms = _large(workload.WorkloadParams(), days=20, rate=50.0)
    # 24,000 expected: one standard deviation is 0.65 %.
    assert len(vms) / (20 * 24) == pytest.approx(50.0, rel=0.03)
    assert all(0.0 <= r.arrive_s < 20 * DAY for r in vms)


def test_arrival_rate_peak_over_trough_and_peak_hour():
    p, vms = _large(workload.WorkloadParams(), days=20, rate=100.0)
    # First Fourier coefficient of the time of day of the arrivals: for
    # a rate mean * (1 + a cos(theta - peak)), 2 |E exp(i theta)| = a.
    z = sum(cmath.exp(1j * 2 * math.pi * r.arrive_s / DAY)
            for r in vms) / len(vms)
    a = 2 * abs(z)
    assert (1 + a) / (1 - a) == pytest.approx(p.diurnal_peak_trough,
                                              abs=0.15)
    peak_h = (cmath.phase(z) / (2 * math.pi) * 24) % 24
    assert peak_h == pytest.approx(p.diurnal_peak_hour, abs=0.5)


def test_arrival_rate_curve():
    p = workload.WorkloadParams()
    t = np.linspace(0, DAY, 24 * 60, endpoint=False)
    rate = workload.arrival_rate(p, t)
    assert rate.mean() * 3600 == pytest.approx(p.arrivals_per_hour)
    assert rate.max() / rate.min() == pytest.approx(p.diurnal_peak_trough,
                                                    rel=1e-3)
    assert t[rate.argmax()] / 3600 == pytest.approx(p.diurnal_peak_hour,
                                                    abs=0.02)


@pytest.mark.parametrize('params', BOTH)
def test_flavor_and_lc_shares(params):
    p, vms = _large(params, days=5)
    # About 48,000 VMs: a share's standard deviation is under 0.25 %.
    total = sum(s for _, s in p.flavors)
    want = {v: s / total for v, s in p.flavors}
    got = _shares([r.vcpus for r in vms])
    assert set(got) == set(want)
    for v in want:
        assert got[v] == pytest.approx(want[v], abs=0.01), v
    assert all(r.memory_mb == r.vcpus * p.memory_mb_per_vcpu for r in vms)
    assert _shares([r.lc for r in vms])[True] == pytest.approx(
        p.lc_share, abs=0.01)


@pytest.mark.parametrize('params', BOTH)
def test_lifetimes_follow_the_published_cdf(params):
    p, vms = _large(params, days=5)
    life_h = np.array([r.lifetime_s for r in vms]) / 3600
    for hours, cdf in p.lifetime_cdf[1:]:
        assert (life_h <= hours).mean() == pytest.approx(cdf, abs=0.01)
    assert life_h.min() >= p.lifetime_cdf[0][0]
    assert life_h.max() <= p.max_lifetime_s / 3600
    # The Pareto tail: survival beyond the last point, and the mass the
    # cap keeps (VMs living the whole 30 days).
    h_last, c_last = p.lifetime_cdf[-1]
    cap_h = p.max_lifetime_s / 3600
    s_cap = (1 - c_last) * (cap_h / h_last) ** -p.lifetime_tail_alpha
    assert (life_h >= cap_h).mean() == pytest.approx(s_cap, abs=0.01)
    assert s_cap > 0.01


@pytest.mark.parametrize('params', BOTH)
def test_utilization_follows_the_published_cdfs(params):
    p, vms = _large(params, days=5)
    mean = np.array([r.mean_load for r in vms]) * 100
    peak = np.array([r.peak_load for r in vms]) * 100
    for x, cdf in p.avg_cpu_cdf[1:-1]:
        assert (mean <= x).mean() == pytest.approx(cdf, abs=0.01), x
    for x, cdf in p.p95_cpu_cdf[1:-1]:
        assert (peak <= x).mean() == pytest.approx(cdf, abs=0.01), x
    assert (peak >= mean).all()


def test_patterns():
    p, vms = _large(workload.WorkloadParams(), days=5)
    assert {r.pattern for r in vms} == set(workload.PATTERNS)
    for r in vms:
        assert (r.pattern == 'idle') == (r.mean_load < p.idle_below)
    busy_lc = [r.pattern for r in vms if r.lc and r.pattern != 'idle']
    got = _shares(busy_lc)
    for pattern, share in p.lc_patterns:
        assert got[pattern] == pytest.approx(share, abs=0.02), pattern
    idle = _shares([r.pattern == 'idle' for r in vms])[True]
    want = np.interp(p.idle_below * 100, *zip(*p.avg_cpu_cdf))
    assert idle == pytest.approx(want, abs=0.01)


def test_warm_start_is_the_steady_population():
    p = dataclasses.replace(workload.WorkloadParams(),
                            arrivals_per_hour=100.0)
    vms = workload.generate(p, 5, DAY)
    at_start = [r for r in vms if r.arrive_s == 0.0]
    assert len(at_start) == pytest.approx(workload.mean_alive(p), rel=0.06)
    assert all(r.lifetime_s > 0 for r in at_start)
    assert all(r.arrive_s >= 0.0 for r in vms)
    arrived = [r for r in vms if r.arrive_s > 0.0]
    assert len(arrived) == pytest.approx(24 * 100, rel=0.1)
    cold = workload.generate(p, 5, DAY, warm=False)
    assert not [r for r in cold if r.arrive_s == 0.0]


def test_held_out_differs_in_flavors_and_lc_share():
    d, h = workload.WorkloadParams(), workload.held_out()
    assert dict(d.flavors) != dict(h.flavors)
    assert abs(d.lc_share - h.lc_share) > 0.1
    assert d.arrivals_per_hour == h.arrivals_per_hour
    for p in (d, h):
        assert sum(s for _, s in p.flavors) == pytest.approx(1.0, abs=0.01)
        assert max(v for v, _ in p.flavors) <= 16
        assert min(v for v, _ in p.flavors) >= 1


def _vm(pattern, mean=0.3, peak=0.8, phase_h=14.0, seed=42):
    return workload.VmRequest(
        vm_id='x', arrive_s=0.0, lifetime_s=10 * DAY, vcpus=4,
        memory_mb=16384, lc=True, pattern=pattern, mean_load=mean,
        peak_load=peak, phase_s=phase_h * 3600, seed=seed)


@pytest.mark.parametrize('pattern', ['diurnal', 'steady', 'bursty'])
def test_load_averages_its_mean(pattern):
    vm = _vm(pattern)
    loads = [workload.load_at(vm, t) for t in range(0, int(4 * DAY), 60)]
    assert all(0.0 <= x <= 1.0 for x in loads)
    assert np.mean(loads) == pytest.approx(vm.mean_load, rel=0.05)


def test_diurnal_load_peaks_at_its_phase():
    vm = _vm('diurnal', mean=0.5, phase_h=20.0)
    loads = [workload.load_at(vm, h * 3600) for h in range(24)]
    assert int(np.argmax(loads)) == 20
    assert max(loads) == pytest.approx(vm.peak_load)
    assert min(loads) == pytest.approx(2 * vm.mean_load - vm.peak_load)
    # A peak more than twice the mean: the swing stops at 0.
    low = _vm('diurnal', mean=0.3, peak=0.8)
    loads = [workload.load_at(low, h * 3600) for h in range(24)]
    assert min(loads) == pytest.approx(0.0, abs=0.01)
    assert max(loads) == pytest.approx(0.6, abs=0.01)


def test_bursty_load_is_on_or_off():
    vm = _vm('bursty')
    loads = {workload.load_at(vm, t) for t in range(0, int(DAY), 60)}
    assert loads == {0.0, vm.peak_load}


def test_steady_and_idle_loads_stay_close():
    p = workload.WorkloadParams()
    steady = [workload.load_at(_vm('steady'), t)
              for t in range(0, int(DAY), 300)]
    assert max(steady) <= 0.3 * (1 + p.steady_noise) + 1e-12
    assert min(steady) >= 0.3 * (1 - p.steady_noise) - 1e-12
    assert len(set(steady)) > 100
    idle = [workload.load_at(_vm('idle', mean=0.01, peak=0.02), t)
            for t in range(0, int(DAY), 300)]
    assert max(idle) < 2 * p.idle_below


def test_load_is_zero_outside_life_and_deterministic():
    vm = dataclasses.replace(_vm('steady'), arrive_s=100.0, lifetime_s=50.0)
    assert workload.load_at(vm, 99.9) == 0.0
    assert workload.load_at(vm, 150.0) == 0.0
    assert workload.load_at(vm, 120.0) > 0.0

    def slots(seed):
        vm = _vm('bursty', seed=seed)
        return [workload.load_at(vm, t) for t in range(0, 9000, 300)]
    a, b, c = slots(1), slots(1), slots(2)
    assert a == b
    assert a != c
    with pytest.raises(ValueError):
        workload.load_at(_vm('sawtooth'), 10.0)


def test_a_spread_start_boots_the_first_population_over_the_window():
    p = dataclasses.replace(workload.WorkloadParams(),
                            arrivals_per_hour=40.0)
    vms = workload.generate(p, 5, 6 * 3600)
    first = [r for r in vms if r.arrive_s == 0.0]
    later = [r for r in vms if r.arrive_s > 0.0]
    assert len(first) > 100 and later
    out = workload.spread_start(vms, 1800.0)
    by_id = {r.vm_id: r for r in out}
    assert [r.arrive_s for r in out] == sorted(r.arrive_s for r in out)
    # The later arrivals are untouched.
    assert all(by_id[r.vm_id] == r for r in later)
    kept = [r for r in first if r.vm_id in by_id]
    arrivals = [by_id[r.vm_id].arrive_s for r in kept]
    # In their order, evenly over the window, each leaving when it did.
    assert arrivals == sorted(arrivals)
    assert arrivals[0] == 0.0 and max(arrivals) < 1800.0
    for i, r in enumerate(first):
        if r.vm_id in by_id:
            assert by_id[r.vm_id].arrive_s == pytest.approx(
                1800.0 * i / len(first))
    for r in kept:
        moved = by_id[r.vm_id]
        assert moved.depart_s == pytest.approx(r.depart_s)
        assert dataclasses.replace(moved, arrive_s=0.0,
                                   lifetime_s=r.lifetime_s) == r
    # One gone before its turn is left out, no other.
    gone = {r.vm_id for r in first} - set(by_id)
    for i, r in enumerate(first):
        assert (r.vm_id in gone) == (r.depart_s <= 1800.0 * i / len(first))


def test_no_spread_is_the_list_and_a_negative_one_is_refused():
    vms = workload.generate(workload.WorkloadParams(), 2, 3600)
    assert workload.spread_start(vms, 0.0) == vms
    with pytest.raises(ValueError, match='seconds must be >= 0'):
        workload.spread_start(vms, -1.0)
