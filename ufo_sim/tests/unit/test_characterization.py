"""The model shows the paper's §3 trends without per-test tuning."""

import pytest

from ufo_sim.calibration import scenarios
from ufo_sim import profiles

MC = profiles.MEMCACHED


def test_guest_sched_frequency_is_concave_in_load():
    sf = [scenarios.dedicated(MC, 4, MC.max_rps * f, seconds=2).guest_sf
          for f in (0.1, 0.45, 0.9)]
    assert sf[1] > 1.5 * sf[0]
    assert sf[1] > 3 * sf[2]


def test_sched_frequency_peaks_before_the_latency_knee():
    loads = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
    ws = [scenarios.dedicated(MC, 4, MC.max_rps * f, seconds=2)
          for f in loads]
    peak = max(range(len(ws)), key=lambda i: ws[i].guest_sf)
    # the tail is fine up to the peak, blows past QoS soon after it
    assert ws[peak].p99_us < MC.qos_p99_us
    assert ws[-1].p99_us > MC.qos_p99_us
    assert ws[-1].runtime_per_schedule_us > 5 * ws[0].runtime_per_schedule_us


def test_runtime_scales_with_load():
    lo = scenarios.dedicated(MC, 8, MC.max_rps * 0.2, seconds=2)
    hi = scenarios.dedicated(MC, 8, MC.max_rps * 0.6, seconds=2)
    # linear, up to the SMT slowdown as siblings get busier
    smt = scenarios.HostSpec().smt_slowdown
    assert 0.9 * 3 < hi.guest_util / lo.guest_util < 3 * smt
    # emulator work per packet is linear, its wake-ups are not: a busier
    # emulator thread sleeps less often (emu_wakeup), so 3x the load
    # costs between 2x and 3x the emulator CPU
    assert 2.0 < hi.emulator_util / lo.emulator_util < 3.0


@pytest.fixture(scope='module')
def modes():
    load = MC.max_rps * 0.4
    return {m: scenarios.four_vms(MC, load, m, seconds=2)
            for m in scenarios.MODES}


def _mean(ws, field):
    return sum(getattr(w, field) for w in ws) / len(ws)


def test_host_aware_isolation_cuts_vcpu_switches_and_delay(modes):
    for other in ('default', 'isolation'):
        assert (_mean(modes[other], 'vcpu_switches') >
                10 * _mean(modes['hostaware'], 'vcpu_switches'))
        assert (_mean(modes[other], 'vcpu_wait_ms') >
                100 * max(_mean(modes['hostaware'], 'vcpu_wait_ms'), 0.01))
        assert (_mean(modes[other], 'host_ctxsw') >
                _mean(modes['hostaware'], 'host_ctxsw'))


def test_host_aware_isolation_helps_the_tail(modes):
    p99 = {m: scenarios.geomean([w.p99_us for w in ws])
           for m, ws in modes.items()}
    assert p99['hostaware'] < 0.75 * p99['isolation']
    assert p99['hostaware'] < 0.75 * p99['default']


def test_guest_switches_stay_with_fewer_vcpus(modes):
    # The application's threads do not shrink with the vCPUs, so guest
    # context switches are not reduced (§3.2). They may rise: isolation
    # runs near its knee here, where work runs back to back (Fig. 4).
    assert (_mean(modes['hostaware'], 'guest_sf') >=
            0.7 * _mean(modes['isolation'], 'guest_sf'))


def test_lc_emulator_works_be_emulator_idles():
    # Fig. 7: emulator CPU is 15-50 % of the vCPU threads' CPU in
    # guest mode (their halt polling apart).
    lc = scenarios.dedicated(MC, 8, MC.max_rps * 0.6, seconds=2)
    assert 0.15 <= lc.emulator_util / lc.vcpu_guest_util <= 0.5
    be = scenarios.be_modes(seconds=2)['default']
    share = (sum(w.emulator_util for w in be) /
             sum(w.vcpu_guest_util for w in be))
    assert share < 0.01


def test_isolating_emulator_threads_helps_memcached():
    load = MC.max_rps * 0.5
    shared = scenarios.emulator_placement(MC, load, isolated=False,
                                          seconds=2)
    isolated = scenarios.emulator_placement(MC, load, isolated=True,
                                            seconds=2)
    assert shared.p99_us > MC.qos_p99_us > isolated.p99_us


def test_be_jobs_barely_care():
    res = scenarios.be_modes(seconds=5)
    done = {m: sum(w.done for w in ws) for m, ws in res.items()}
    # Fig. 2b: 0.7 % on average, 7 % at most (Spark).
    assert done['hostaware'] == pytest.approx(done['default'], rel=0.07)
    assert _mean(res['default'], 'guest_sf') < 100


def test_lc_switches_orders_of_magnitude_more_than_be():
    lc = scenarios.dedicated(MC, 8, MC.max_rps * 0.5, seconds=2)
    be = scenarios.be_modes(seconds=2)['default']
    assert lc.guest_sf > 50 * _mean(be, 'guest_sf')


@pytest.mark.parametrize('fewer,more', [(2, 4), (4, 6), (6, 8)])
def test_the_30_percent_sf_rule_fires_at_or_just_past_the_knee(fewer, more):
    # Paper section 4.5: the rule's 30 % difference is where QoS is lost.
    # SF counts switches into threads (the guest module's count): the
    # rule fires at the knee or up to seven points of load after it (seed
    # 1: 28/51/78 % against 27/48/71 %). Counting switches into the idle
    # task as well, it fired up to two points before it (23/46/71 %).
    from ufo_sim.calibration import report
    found = report.sf_rule_vs_knee(MC, fewer, more, [1], seconds=2.0)
    assert found['fires'] is not None and found['knee'] is not None
    assert 0.0 <= found['fires'] - found['knee'] <= 0.07 + 1e-9


def test_mysql_sf_barely_differs_between_core_counts():
    # Paper appendix A.3: a MySQL request takes X switches whatever the
    # load, so SF is X x R on any count and the 30 % rule is too relaxed
    # for MySQL. Counting switches into the idle task too, a busy vCPU's
    # direct handoffs halved it, and the gap at the 4-CPU knee was 52-55 %.
    from ufo_sim.calibration import report
    found = report.sf_rule_vs_knee(profiles.MYSQL, 4, 6, [1], seconds=2.0)
    assert found['knee'] is not None
    assert found['gap_at_knee'] < 0.3


def test_the_slides_sf_fit_peaks_at_two_thirds_of_the_max_load():
    from ufo_sim.calibration import report
    peak, ratio = report.slides_sf_peak()
    assert abs(peak - 234.1 / 350) < 0.001
    assert abs(ratio - 0.766) < 0.001


def test_sf_peaks_before_the_knee_and_falls_by_it():
    # Fig. 4: guest SF rises, peaks, then falls as requests queue; the
    # knee (QoS lost) comes after the peak.
    from ufo_sim.calibration import report
    found = report.sf_peak_vs_knee(MC, 2, [1], seconds=2.0)
    assert found['knee'] is not None
    assert found['peak'] <= found['knee']
    assert 0.0 < found['ratio'] <= 1.0
