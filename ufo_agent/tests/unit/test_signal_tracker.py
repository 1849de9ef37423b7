"""HostSignalTracker: classification, hysteresis windows, sequence."""

from hypothesis import given
from hypothesis import strategies as st
import pytest

from ufo_agent import hostsignal
from ufo_agent.hostsignal import model

W = hostsignal.Windows(saturated_max_idle_cores=2, overloaded_after=10,
                       overloaded_clear_after=30, underloaded_after=30,
                       saturated_after=5)


def usage(t, idle=0, unmet=0, managed=16, reclaimable=None):
    return hostsignal.HostUsage(
        managed_cores=managed, idle_cores=idle,
        reclaimable_cores=idle if reclaimable is None else reclaimable,
        unmet_cores=unmet, timestamp=float(t))


def run(tracker, samples):
    return [tracker.update(u).state for u in samples]


def test_classify_follows_appendix_b4():
    tracker = hostsignal.HostSignalTracker(W)
    assert tracker.classify(usage(0, idle=3)) == hostsignal.UNDERLOADED
    assert tracker.classify(usage(0, idle=2)) == hostsignal.SATURATED
    assert tracker.classify(usage(0, idle=0)) == hostsignal.SATURATED
    # Unmet demand wins over a large idle pool in the same tick.
    assert tracker.classify(usage(0, idle=5, unmet=1)) == (
        hostsignal.OVERLOADED)


def test_starts_saturated_and_becomes_underloaded_after_window():
    tracker = hostsignal.HostSignalTracker(W)
    states = run(tracker, [usage(t, idle=8) for t in range(0, 31)])
    assert states[:30] == [hostsignal.SATURATED] * 30
    assert states[30] == hostsignal.UNDERLOADED


def test_overload_needs_consistent_unmet_demand():
    tracker = hostsignal.HostSignalTracker(W)
    # Unmet demand for 9 s, one good tick, unmet again: the window restarts.
    samples = [usage(t, unmet=1) for t in range(0, 10)]
    samples += [usage(10)]
    samples += [usage(t, unmet=1) for t in range(11, 22)]
    states = run(tracker, samples)
    assert hostsignal.OVERLOADED not in states[:21]
    assert states[-1] == hostsignal.OVERLOADED  # t=21: 10 s since t=11


def test_overload_clears_only_after_clear_window():
    tracker = hostsignal.HostSignalTracker(W)
    run(tracker, [usage(t, unmet=2) for t in range(0, 11)])
    assert tracker.signal.state == hostsignal.OVERLOADED
    # Idle pool is large again, but overload is left only after 30 s.
    states = run(tracker, [usage(t, idle=10) for t in range(11, 42)])
    assert states[:30] == [hostsignal.OVERLOADED] * 30
    assert states[30] == hostsignal.UNDERLOADED


def test_overload_clears_while_the_idle_pool_flickers():
    tracker = hostsignal.HostSignalTracker(W)
    run(tracker, [usage(t, unmet=2) for t in range(0, 11)])
    assert tracker.signal.state == hostsignal.OVERLOADED
    # Demand is met from t=11 on; a core enters and leaves the idle pool
    # every tick (3, 2, 3, ... idle cores: underloaded, saturated, ...).
    states = run(tracker, [usage(t, idle=3 - t % 2) for t in range(11, 61)])
    assert states[:30] == [hostsignal.OVERLOADED] * 30   # t=11..40
    # t=41: 30 s without unmet demand; the pool never stayed large for
    # underloaded_after, so the host is only saturated ("send no more").
    assert states[30:] == [hostsignal.SATURATED] * 20


def test_unmet_demand_keeps_the_host_overloaded():
    tracker = hostsignal.HostSignalTracker(W)
    run(tracker, [usage(t, unmet=2) for t in range(0, 11)])
    # A tick of unmet demand every 20 s restarts the clear window.
    samples = [usage(t, idle=8, unmet=1 if t % 20 == 0 else 0)
               for t in range(11, 101)]
    assert set(run(tracker, samples)) == {hostsignal.OVERLOADED}


def test_single_noisy_tick_does_not_flap():
    tracker = hostsignal.HostSignalTracker(W)
    run(tracker, [usage(t, idle=8) for t in range(0, 31)])
    states = run(tracker, [usage(31, idle=0), usage(32, idle=8),
                           usage(33, unmet=3), usage(34, idle=8)])
    assert states == [hostsignal.UNDERLOADED] * 4


def test_saturates_quickly_from_underloaded():
    tracker = hostsignal.HostSignalTracker(W)
    run(tracker, [usage(t, idle=8) for t in range(0, 31)])
    states = run(tracker, [usage(t, idle=1) for t in range(31, 37)])
    assert states[:5] == [hostsignal.UNDERLOADED] * 5
    assert states[5] == hostsignal.SATURATED


def test_signal_fields_sequence_and_source():
    tracker = hostsignal.HostSignalTracker(W, source='agent-1')
    first = tracker.update(usage(5, idle=4, unmet=0, reclaimable=6))
    second = tracker.update(usage(6, idle=3, unmet=1, reclaimable=5))
    assert (first.sequence, second.sequence) == (1, 2)
    assert second.idle_cores == 3
    assert second.reclaimable_cores == 5
    assert second.unmet_cores == 1
    assert second.managed_cores == 16
    assert second.timestamp == 6.0
    assert second.source == 'agent-1'
    assert hostsignal.HostSignalTracker(W).source != tracker.source


def test_clock_going_back_restarts_window():
    tracker = hostsignal.HostSignalTracker(W)
    run(tracker, [usage(t, unmet=1) for t in range(100, 109)])
    # Clock jumps back: the 9 s already seen do not count any more.
    states = run(tracker, [usage(t, unmet=1) for t in range(50, 59)])
    assert hostsignal.OVERLOADED not in states


def test_zero_windows_follow_raw_state():
    tracker = hostsignal.HostSignalTracker(hostsignal.Windows(
        overloaded_after=0, overloaded_clear_after=0, underloaded_after=0,
        saturated_after=0))
    assert run(tracker, [usage(0, idle=5), usage(1, unmet=1), usage(2)]) == [
        hostsignal.UNDERLOADED, hostsignal.OVERLOADED, hostsignal.SATURATED]


def test_rejects_non_usage():
    with pytest.raises(TypeError):
        hostsignal.HostSignalTracker(W).update({'idle_cores': 1})


@pytest.mark.parametrize('kwargs, message', [
    ({'idle_cores': -1}, 'idle_cores must be >= 0'),
    ({'idle_cores': 17}, 'exceeds managed_cores'),
    ({'reclaimable_cores': 17}, 'exceeds managed_cores'),
    ({'unmet_cores': 1.5}, 'unmet_cores must be an integer'),
    ({'timestamp': 'now'}, 'timestamp must be a number'),
])
def test_usage_validation(kwargs, message):
    args = dict(managed_cores=16, idle_cores=1, reclaimable_cores=1,
                unmet_cores=0, timestamp=0.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        hostsignal.HostUsage(**args)


def test_windows_validation_and_conf():
    with pytest.raises(ValueError, match='overloaded_after'):
        hostsignal.Windows(overloaded_after=-1)
    from oslo_config import cfg

    from ufo_agent.conf import signal as signal_conf
    conf = cfg.ConfigOpts()
    signal_conf.register_opts(conf)
    conf([])
    conf.set_override('overloaded_after', 3.0, group='signal')
    windows = hostsignal.Windows.from_conf(conf)
    assert windows.overloaded_after == 3.0
    assert windows.saturated_max_idle_cores == 2
    with pytest.raises(ValueError):
        conf.set_override('saturated_max_idle_cores', -1, group='signal')


def test_signal_rejects_unknown_state():
    with pytest.raises(ValueError, match='state must be one of'):
        model.HostSignal(state='busy', idle_cores=0, reclaimable_cores=0,
                         managed_cores=1, unmet_cores=0, sequence=1,
                         timestamp=0.0, source='x')


ticks = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 2)),
                 min_size=1, max_size=200)


@given(ticks)
def test_state_changes_only_after_a_full_window(samples):
    """Property: no change of state without a full window.

    Every change of state is backed by a run of raw states at least as long
    as the transition's window; leaving overload, by a run without unmet
    demand (and a run of underloaded ticks to become underloaded).
    """
    tracker = hostsignal.HostSignalTracker(W)
    raws, states = [], []
    for t, (idle, unmet) in enumerate(samples):
        u = usage(t, idle=idle, unmet=unmet)
        raws.append(tracker.classify(u))
        states.append(tracker.update(u).state)
    previous = hostsignal.SATURATED
    for t, state in enumerate(states):
        if state != previous:
            window = W.window(previous, state)
            assert t - int(window) >= 0
            run = raws[t - int(window):t + 1]
            if previous == hostsignal.OVERLOADED:
                assert hostsignal.OVERLOADED not in run
                if state == hostsignal.SATURATED:
                    run = []    # whatever the idle pool did meanwhile
                else:
                    run = raws[t - int(W.underloaded_after):t + 1]
            assert all(r == state for r in run)
        previous = state
    assert [s.sequence for s in [tracker.signal]] == [len(samples)]


def test_usage_charges_offloaded_io_running_on_the_idle_pool():
    from ufo_agent.controller import Controller
    from ufo_agent.controller import ControllerConfig
    from ufo_agent.controller import HostTopology
    from ufo_agent.controller import VmSample
    from ufo_agent.controller import VmSpec

    def plan(emulator_min_cores, emulator_busy):
        controller = Controller(HostTopology.uniform(6, 2), ControllerConfig(
            emulator_min_cores=emulator_min_cores))
        controller.add_vm(VmSpec('vm', 2, 'lc'))
        return controller.tick(0.0, {'vm': VmSample(50.0, 1000.0)},
                               emulator_busy)

    # With an emulator pool, its CPU is in the pool: the idle pool is idle.
    pooled = plan(1, 150.0)
    assert hostsignal.HostUsage.from_plan(pooled, 5.0).idle_cores == \
        len(pooled.idle_cores)
    # With none (small hosts), 0.6 CPUs of I/O, too little for a core of
    # its own, still keep one idle-pool core busy.
    small = plan(0, 60.0)
    assert not small.emulator_cores
    usage = hostsignal.HostUsage.from_plan(small, 5.0)
    assert usage.idle_cores == len(small.idle_cores) - 1
    assert usage.reclaimable_cores == usage.idle_cores
    assert usage.timestamp == 5.0
    assert hostsignal.HostUsage.from_plan(plan(0, 0.0), 5.0).idle_cores \
        == len(plan(0, 0.0).idle_cores)
