"""A guest's claims checked against what the host saw its vCPUs do."""


import hypothesis
from hypothesis import strategies as st
import pytest

from ufo_agent.channel import crosscheck as cc
from ufo_agent.service import sampler


def points(*rows):
    """HostPoints from (time, cpu s, wait s, slices) rows."""
    return [cc.HostPoint(t, int(cpu * 1e9), int(wait * 1e9), slices)
            for t, cpu, wait, slices in rows]


def claim(seen, util, switches=0.0, vcpus=2, after=None):
    """A sample first seen at ``seen``, used on that one-second tick.

    ``after``: the read before the one that showed its predecessor (by
    default the one two ticks back).
    """
    after = seen - 2.0 if after is None else after
    return cc.Use(start=after - cc.PUBLISH_MARGIN_S, end=seen, span_s=1.0,
                  util_pct=util, switches_per_s=switches, vcpus=vcpus)


STEADY = points(*[(100.0 + i, 0.5 * i, 0.1 * i, 100 * i)
                  for i in range(12)])      # 50 % CPU, 10 % wait, 100/s


def test_host_usage_over_whole_and_partial_intervals():
    pts = points((10.0, 0, 0, 0), (11.0, 1.0, 0.5, 10), (12.0, 1.5, 0.5, 20))
    whole = cc.host_usage(pts, 10.0, 12.0, vcpus=4)
    assert whole == cc.HostUsage(2.0, 1.5, 20)
    # A quarter of the first second: at most all of it, at most 4 x 0.25.
    part = cc.host_usage(pts, 10.75, 12.0, vcpus=4)
    assert part.runnable_s == pytest.approx(1.0 + 0.5)
    part = cc.host_usage(pts, 10.95, 12.0, vcpus=4)
    assert part.runnable_s == pytest.approx(0.5 + 0.2)
    assert part.cpu_s == pytest.approx(0.5 + 0.2)
    assert part.slices == 20


def test_host_usage_without_counters_counts_every_vcpu_busy():
    pts = points((10.0, 0, 0, 0), (11.0, 0.1, 0, 5))
    usage = cc.host_usage(pts, 9.5, 11.0, vcpus=2)
    assert usage.runnable_s == pytest.approx(1.0 + 0.1)
    assert usage.slices == 5
    assert cc.host_usage([], 0.0, 2.0, 3).cpu_s == 6.0


def test_an_honest_steady_guest_passes():
    # Claims what the threads ran, and more (its wait counts as busy
    # without steal-time accounting): 60 %.
    claims = [claim(102.0 + i, 60.0, switches=50_000) for i in range(10)]
    assert cc.check_uses(STEADY, claims).ok


def test_a_guest_without_steal_accounting_may_count_waits_as_busy():
    # 50 % on a CPU and 10 % waiting for one: up to 60 % (+10 %) is fine.
    claims = [claim(102.0 + i, 65.0) for i in range(10)]
    assert cc.check_uses(STEADY, claims).ok


def test_a_lasting_lie_of_a_third_is_caught():
    claims = [claim(102.0 + i, 80.0) for i in range(10)]
    verdict = cc.check_uses(STEADY, claims)
    assert not verdict.ok and 'vCPU-s busy' in verdict.reason
    # A single sample can be explained by the misalignment...
    assert cc.check_uses(STEADY, claims[-1:]).ok
    # ...but not a gross lie.
    assert not cc.check_uses(STEADY, [claim(110.0, 200.0)]).ok


def test_an_idle_guest_cannot_claim_to_be_busy():
    # Its vCPU threads ran 0.2 % of a CPU; the idle threshold is 1 %.
    idle = points(*[(100.0 + i, 0.002 * i, 0, 50 * i) for i in range(12)])
    honest = [claim(102.0 + i, 0.15) for i in range(10)]
    assert cc.check_uses(idle, honest).ok
    assert not cc.check_uses(idle, [claim(110.0, 10.0)]).ok
    lie = [claim(102.0 + i, 1.5) for i in range(10)]
    assert not cc.check_uses(idle, lie[:5]).ok      # within 5 seconds


def test_an_idle_guest_cannot_claim_thousands_of_switches():
    # 0.2 ms of CPU a second and 50 wake-ups: its module's poll thread.
    idle = points(*[(100.0 + i, 0.0002 * i, 0, 50 * i) for i in range(12)])
    honest = [claim(102.0 + i, 0.02, switches=100) for i in range(10)]
    assert cc.check_uses(idle, honest).ok
    verdict = cc.check_uses(idle, [claim(110.0, 0.02, switches=5000)])
    assert not verdict.ok and 'context switches' in verdict.reason
    # With 1 ms of CPU a second, 4000 switches a second are possible.
    idle = points(*[(100.0 + i, 0.001 * i, 0, 50 * i) for i in range(12)])
    assert cc.check_uses(idle, [claim(102.0 + i, 0.1, switches=3000)
                                for i in range(10)]).ok
    assert not cc.check_uses(idle, [claim(110.0, 0.1, switches=30000)]).ok


def test_switches_are_bounded_by_cpu_time():
    # 0.5 s of CPU a second: at most 0.5 / MIN_SWITCH_NS switches.
    most = 0.5e9 / cc.MIN_SWITCH_NS
    assert cc.check_uses(STEADY, [claim(102.0 + i, 50.0,
                                        switches=0.9 * most)
                                  for i in range(10)]).ok
    assert not cc.check_uses(STEADY, [claim(102.0 + i, 50.0,
                                            switches=1.5 * most)
                                      for i in range(10)]).ok


def test_a_burst_across_a_tick_boundary_is_not_a_lie():
    # One second at 100 % of a vCPU, half in each of two host ticks; the
    # guest's sample window holds all of it, each host tick half.
    pts = points((100.0, 0, 0, 0), (101.0, 0, 0, 0), (102.0, 0.5, 0, 10),
                 (103.0, 1.0, 0, 20), (104.0, 1.0, 0, 30))
    burst = claim(103.0, 100.0, after=101.0)
    assert cc.check_uses(pts, [claim(102.0, 0.0, after=100.0), burst]).ok


def test_a_sample_used_on_two_ticks_claims_twice():
    # 0.6 s runnable a second: one sample of 150 % used on one tick fits
    # the 2.25 s that hold it; used on three ticks, 4.5 s do not fit 4.25.
    once = claim(105.0, 150.0)
    again = [once._replace(end=105.0 + i) for i in range(3)]
    assert cc.check_uses(STEADY, [once]).ok
    verdict = cc.check_uses(STEADY, again)
    assert not verdict.ok and 'vCPU-s busy' in verdict.reason


def test_the_window_of_a_sample_comes_from_the_host_s_reads():
    # Seen first at 105, the one before it first at 104: its window
    # starts after the read at 103 (a quarter second of publishing lag).
    assert cc.window_start(104.0, False, 103.0, 2.5) == 102.75
    # Its predecessor never showed: published after the read at 104.
    assert cc.window_start(104.0, True, 103.0, 2.5) == 103.75
    # Its predecessor showed at the first read: at most the longest
    # window the host accepts before that.
    assert cc.window_start(104.0, False, None, 2.5) == 101.25
    assert cc.window_start(104.0, False, 50.0, 2.5) == 101.25
    # Nothing before it: not checkable.
    assert cc.window_start(None, False, None, 2.5) is None


def test_host_only_sample_is_never_negative():
    s = sampler.host_only_sample(-1.0, 300.0, -5.0)
    assert (s.util, s.sf, s.steal) == (0.0, 300.0, 0.0)


def _usage_by_walking(points, start, end, vcpus):
    """host_usage's rule, interval by interval: the reference."""
    if not points:
        return cc.HostUsage((end - start) * vcpus, (end - start) * vcpus, 0)
    uncovered = max(0.0, min(end, points[0].time) - start) + \
        max(0.0, end - max(start, points[-1].time))
    runnable = cpu = uncovered * vcpus
    slices = 0
    for p0, p1 in zip(points, points[1:]):
        overlap = min(end, p1.time) - max(start, p0.time)
        if overlap <= 0:
            continue
        d_cpu = max(0, p1.cpu_ns - p0.cpu_ns) / 1e9
        d_run = d_cpu + max(0, p1.wait_ns - p0.wait_ns) / 1e9
        slices += max(0, p1.slices - p0.slices)
        if start <= p0.time and p1.time <= end:
            runnable, cpu = runnable + d_run, cpu + d_cpu
        else:
            runnable += min(d_run, overlap * vcpus)
            cpu += min(d_cpu, overlap * vcpus)
    return cc.HostUsage(runnable, cpu, slices)


@hypothesis.given(
    steps=st.lists(st.tuples(st.floats(0.01, 3.0), st.integers(-10, 10 ** 9),
                             st.integers(-10, 10 ** 9),
                             st.integers(-10, 1000)), max_size=16),
    start=st.floats(90.0, 140.0), length=st.floats(0.0, 30.0),
    vcpus=st.integers(1, 8))
def test_spans_from_sums_are_the_interval_walk(steps, start, length, vcpus):
    rows, t, cpu, wait, slices = [], 100.0, 0, 0, 0
    for dt, d_cpu, d_wait, d_slices in steps:
        t, cpu, wait, slices = (t + dt, cpu + d_cpu, wait + d_wait,
                                slices + d_slices)
        rows.append(cc.HostPoint(t, cpu, wait, slices))
    got = cc.HostCounters(rows).usage(start, start + length, vcpus)
    want = _usage_by_walking(rows, start, start + length, vcpus)
    assert got.slices == want.slices
    assert got.runnable_s == pytest.approx(want.runnable_s, abs=1e-6)
    assert got.cpu_s == pytest.approx(want.cpu_s, abs=1e-6)


def test_counters_kept_up_to_date_answer_as_counters_built_anew():
    import random
    rnd = random.Random(7)
    kept = cc.HostCounters(maxlen=6)
    points, t, cpu, wait, slices = [], 100.0, 0, 0, 0
    for _ in range(40):
        t += rnd.uniform(0.5, 1.5)
        cpu += rnd.randrange(0, 2 * 10 ** 9)
        wait += rnd.randrange(0, 10 ** 8)
        slices += rnd.randrange(0, 500)
        points.append(cc.HostPoint(t, cpu, wait, slices))
        kept.append(points[-1])
        anew = cc.HostCounters(points[-6:])
        assert kept.times == anew.times
        for _ in range(5):
            start = rnd.uniform(t - 8, t)
            end = rnd.uniform(start, t + 1)
            got, want = kept.usage(start, end, 2), anew.usage(start, end, 2)
            assert got == pytest.approx(want, abs=1e-9)
            uses = [cc.Use(start, end, end - start, rnd.uniform(0, 200),
                           rnd.uniform(0, 5e5), 2)]
            assert cc.check_uses(kept, uses) == cc.check_uses(points[-6:],
                                                              uses)


def _check_every_suffix(points, uses, tolerance):
    """check_uses's rule, each suffix on its own span: the reference."""
    uses = uses[-cc.HISTORY:]     # the uses it keeps
    end = uses[-1].end
    for k in range(1, len(uses) + 1):
        suffix = uses[-k:]
        span = sum(u.span_s for u in suffix)
        if span <= 0:
            continue
        vcpus = max([1] + [u.vcpus for u in suffix])
        start = min([end] + [u.start for u in suffix])
        usage = cc.host_usage(points, start, end, vcpus)
        if sum(u.busy_s for u in suffix) > cc.util_limit_s(
                usage, vcpus, tolerance) or \
                sum(u.switches for u in suffix) > cc.switch_limit(usage):
            return False
    return True


@hypothesis.settings(max_examples=300)
@hypothesis.given(
    busy=st.floats(0.0, 8.0), claims=st.lists(
        st.tuples(st.floats(0.0, 1.5), st.floats(0.0, 1.5),
                  st.floats(0.0, 1e6), st.integers(1, 8),
                  st.floats(0.0, 0.6)), min_size=1, max_size=12),
    tolerance=st.sampled_from([0.0, 0.1]))
def test_every_suffix_is_checked_on_its_own_span(busy, claims, tolerance):
    # Claims near what the host saw: the verdict hangs on single spans.
    rows, t = [cc.HostPoint(100.0, 0, 0, 0)], 100.0
    for i in range(16):
        t += 1.0
        rows.append(cc.HostPoint(t, int(busy * (t - 100) * 1e9),
                                 int(busy * (t - 100) * 1e8), 300 * i))
    times = [row.time for row in rows]
    uses = []
    for j, (factor, span, switches, vcpus, early) in enumerate(claims):
        end = times[len(times) - len(claims) + j]
        uses.append(cc.Use(end - 1.0 - early, end, span,
                           100.0 * busy * factor / max(span, 1e-9),
                           switches, vcpus))
    assert cc.check_uses(rows, uses, tolerance).ok == \
        _check_every_suffix(rows, uses, tolerance)
