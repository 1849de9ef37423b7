"""A VM working off a backlog: told from its traffic, its grows wait."""

import dataclasses

from ufo_agent.controller import backlog
from ufo_agent.controller import controller as ctl
from ufo_agent.controller import Controller
from ufo_agent.controller import ControllerConfig
from ufo_agent.controller import HostTopology
from ufo_agent.controller import predictor
from ufo_agent.controller import VmSample
from ufo_agent.controller import VmSpec


def _traffic(packets_in, packets_out, size_in=100.0, size_out=100.0):
    """A sample with this traffic, bytes in proportion to packets."""
    if packets_in is None:
        return VmSample(100.0, 9000.0)
    return VmSample(100.0, 9000.0, packets_in=packets_in,
                    packets_out=packets_out,
                    bytes_in=packets_in * size_in,
                    bytes_out=packets_out * size_out)


class _Detector(backlog.BacklogDetector):
    def update(self, packets_in, packets_out, busy, now, **sizes):
        return super().update(_traffic(packets_in, packets_out, **sizes),
                              busy, now)


def _learned(config=None, ratio=1.0, samples=8):
    detector = _Detector(config or ControllerConfig())
    for t in range(samples):
        assert not detector.update(5000.0, 5000.0 * ratio, False, float(t))
    return detector


def test_more_packets_out_than_usual_is_a_drain():
    detector = _learned(ratio=2.0)
    assert detector.update(5000.0, 15000.0, True, 10.0)
    # Within sf_match_tolerance of the usual ratio: not a drain.
    assert not detector.update(5000.0, 11000.0, True, 11.0)


def test_fewer_packets_out_than_in_is_a_step_not_a_drain():
    detector = _learned()
    assert not detector.update(8000.0, 5000.0, True, 10.0)


def test_the_ratio_is_of_bytes_not_packets():
    # Under load, receive coalescing puts three requests in a packet: the
    # packets' ratio triples, the bytes' does not move.
    detector = _learned()
    assert not detector.update(5000.0 / 3, 5000.0, True, 10.0,
                               size_in=300.0)
    # A backlog's answers are bytes out, in whatever packets.
    assert detector.update(5000.0, 2500.0, True, 11.0, size_out=400.0)


def test_the_usual_ratio_is_learned_only_when_not_busy_or_draining():
    detector = _learned()
    for t in range(10, 40):
        detector.update(8000.0, 4000.0, True, float(t))    # a step
    assert detector.usual == 1.0
    assert detector.update(5000.0, 7000.0, False, 40.0)   # a drain
    assert detector.usual == 1.0
    detector.update(5000.0, 5500.0, False, 41.0)
    assert 1.0 < detector.usual < 1.1


def test_a_few_packets_do_not_make_a_drain():
    # 20 out for 10 in is twice the usual ratio, but such counts are
    # noise; 4000 for 2000 is not.
    detector = _learned()
    assert not detector.update(10.0, 20.0, True, 10.0)
    assert detector.update(2000.0, 4000.0, True, 11.0)


def test_a_drain_lasts_at_most_drain_hold_max():
    detector = _learned(ControllerConfig(drain_hold_max=3.0))
    assert [detector.update(5000.0, 9000.0, True, 10.0 + t)
            for t in range(5)] == [True, True, True, False, False]
    # What lasts that long is the guest's new usual ratio.
    assert detector.usual == 1.8


def test_unknown_packets_or_a_zero_hold_say_nothing():
    detector = _learned()
    assert not detector.update(None, None, True, 10.0)
    assert not detector.update(0.0, 300.0, True, 11.0)
    off = _learned(ControllerConfig(drain_hold_max=0.0))
    assert not off.update(5000.0, 15000.0, True, 10.0)


def _run(packets, seconds, start=0, controller=None, config=None):
    """'web' on one core of six, saturated from ``start``; its cores."""
    if controller is None:
        controller = Controller(HostTopology.uniform(6, 1), config)
        controller.add_vm(VmSpec('web', 4, 'lc'))
    cores = []
    for t in range(start, start + seconds):
        have = len(controller.vms['web'].cores) or 1
        sample = dataclasses.replace(
            _traffic(*packets(t)),
            util=min(100.0 * have, 150.0) if t >= 20 else 40.0)
        plan = controller.tick(float(t), {'web': sample}, 10.0)
        cores.append(len(plan.vms['web'].cores))
    return controller, cores


def _settled(config=None):
    # Twenty quiet seconds: down to one core, its usual ratio learned.
    controller, cores = _run(lambda t: (3000.0, 3000.0), 20, config=config)
    assert cores[-1] == 1
    return controller


def test_a_vm_saturated_by_a_backlog_does_not_grow():
    controller = _settled()
    # Saturated, answering twice what arrives: a burst's queue.
    controller, cores = _run(lambda t: (3000.0, 6000.0), 4, 20, controller)
    assert cores == [1, 1, 1, 1]
    assert controller.vms['web'].last_action.reason.rule == ctl.DRAINING


def test_a_vm_saturated_by_a_step_grows():
    controller = _settled()
    controller, cores = _run(lambda t: (6000.0, 4000.0), 4, 20, controller)
    assert cores[-1] > 1


def test_without_packet_counters_a_saturated_vm_grows():
    controller = _settled()
    controller, cores = _run(lambda t: (None, None), 4, 20, controller)
    assert cores[-1] > 1
    controller = _settled()
    controller, cores = _run(lambda t: (3000.0, 0.0), 4, 20, controller)
    assert cores[-1] > 1


def test_a_drain_holds_a_grow_for_at_most_drain_hold_max():
    controller = _settled(ControllerConfig(drain_hold_max=3.0))
    controller, cores = _run(lambda t: (3000.0, 6000.0), 8, 20, controller)
    assert cores[:3] == [1, 1, 1] and cores[-1] > 1


def test_a_vm_answering_clearly_less_than_usual_serves_that_share():
    detector = _learned()
    assert abs(detector.served(_traffic(6000.0, 2000.0)) - 1 / 3) < 1e-9
    # Within sf_match_tolerance of the usual ratio: not short.
    assert detector.served(_traffic(5000.0, 4500.0)) is None
    # A backlog's drain is not a shortfall.
    assert detector.served(_traffic(5000.0, 9000.0)) is None
    # Too few packets to tell a third from noise.
    assert detector.served(_traffic(15.0, 5.0)) is None
    # Without a usual ratio or traffic, nothing is known.
    assert _Detector(ControllerConfig()).served(
        _traffic(6000.0, 2000.0)) is None
    assert detector.served(_traffic(None, None)) is None
    assert detector.served(_traffic(6000.0, 0.0)) is None


def test_the_usual_ratio_is_learned_with_the_drain_rule_off():
    detector = _learned(ControllerConfig(drain_hold_max=0.0), ratio=2.0)
    assert detector.usual == 2.0
    assert abs(detector.served(_traffic(6000.0, 4000.0)) - 1 / 3) < 1e-9


def _step(demand, config=None, seconds=8, steal=None, host_cores=10,
          decisions=None):
    """'web' on one core of ``host_cores``, then a step to ``demand``.

    It has 8 vCPUs, one CPU per core, and answers what its cores can run
    of the step. Returns its cores over the step and the reasons of its
    grows. With ``steal``, its samples are host-only ones, with that
    steal in the step. ``decisions`` collects its decisions in the step.
    """
    controller = Controller(HostTopology.uniform(host_cores, 1), config)
    controller.add_vm(VmSpec('web', 8, 'lc'))
    quiet = 60
    cores, grows = [], []
    for t in range(quiet + seconds):
        have = len(controller.vms['web'].cores) or 1
        load = 40.0 if t < quiet else demand
        util = min(load, 100.0 * have)
        answered = 3000.0 * util / load
        sample = VmSample(util, 9000.0, packets_in=3000.0,
                          packets_out=answered, bytes_in=3000.0 * 100,
                          bytes_out=answered * 100)
        if steal is not None:
            sample = dataclasses.replace(
                sample, steal=steal if t >= quiet else 0.0)
        plan = controller.tick(float(t), {'web': sample}, 10.0)
        cores.append(len(plan.vms['web'].cores))
        grows += [d.reason for d in plan.decisions
                  if d.vm == 'web' and d.new > d.old and t >= quiet]
        if decisions is not None and t >= quiet:
            decisions += [d for d in plan.decisions if d.vm == 'web']
    assert cores[quiet - 1] == 1
    return cores[quiet:], grows


def test_a_step_grows_a_vm_to_what_its_traffic_needs_in_one_move():
    # 300 % of load on one CPU: it answers a third, so it needs four
    # CPUs under pcu_high, not two; the second sample confirms the grow.
    # (Five cores leave none idle for drain cores.)
    cores, grows = _step(300.0, host_cores=5)
    assert cores[:2] == [1, 4]
    assert grows[0].rules()[:2] == [ctl.TRAFFIC, predictor.PCU_HIGH]
    traffic, pcu = grows[0].parts()[:2]
    assert round(traffic.values['share']) == 33
    assert (round(pcu.values['pcu']), pcu.values['cores']) == (300, 1)


def test_without_the_traffic_rule_a_step_grows_a_core_at_a_time():
    cores, grows = _step(300.0,
                         ControllerConfig(grow_to_traffic_demand=False))
    assert cores[:2] == [1, 2]
    assert grows[0].find(ctl.TRAFFIC) is None


def test_a_demand_read_from_traffic_never_passes_the_flavor():
    # Answering a hundredth: the demand is at most its eight vCPUs.
    cores, _ = _step(10000.0)
    assert cores[1] == 8
    assert max(cores) == 8


def test_a_host_only_guest_reads_its_demand_from_steal_not_traffic():
    # Its runnable demand (util / (1 - steal)) is 200 %: two CPUs, though
    # it answers a third of its traffic.
    cores, grows = _step(300.0, steal=0.5)
    assert cores[:2] == [1, 2]
    assert grows[0].find(ctl.TRAFFIC) is None


def test_work_left_unanswered_adds_up_over_consecutive_short_ticks():
    detector = _learned()
    short = _traffic(6000.0, 2000.0)    # answers a third of 300 %
    assert detector.left_unanswered(short, 1 / 3, 10.0) == 200.0
    assert detector.left_unanswered(short, 1 / 3, 11.0) == 400.0
    # A gap (the VM was settling) starts a new run.
    assert detector.left_unanswered(short, 1 / 3, 15.0) == 200.0
    # A sample that is not short ends it.
    assert detector.left_unanswered(short, None, 16.0) == 0.0
    assert detector.left_unanswered(short, 1 / 3, 17.0) == 200.0


def test_a_step_grow_runs_its_backlog_on_idle_cores_for_one_tick():
    # Two ticks at a third of 300 % left 400 % of work queued: seven
    # CPUs run the demand and that within a tick. The three beyond the
    # demand's four are not committed and go back on the next tick.
    decisions = []
    cores, grows = _step(300.0, decisions=decisions)
    assert cores[:4] == [1, 7, 4, 4]
    drain = grows[0].find(ctl.DRAIN_CORES)
    assert (drain.values['extra'], round(drain.values['need'])) == (3, 700)
    assert [(d.action, d.old, d.new) for d in decisions[:2]] == [
        ('grow', 1, 7), ('drained', 7, 4)]
    assert decisions[1].time == decisions[0].time + 1.0
    # Giving the drain cores back is a core change: the VM's samples
    # count again settle_time after it, not after the grow.
    controller = Controller(HostTopology.uniform(10, 1))
    controller.add_vm(VmSpec('web', 8, 'lc'))
    state = controller.vms['web']
    state.drain_back, state.want, state.changed_at = 4, 7, 61.0
    state.cores = frozenset(range(1, 8))
    controller.tick(62.0, {'web': VmSample(300.0, 9000.0)}, 10.0)
    assert len(state.cores) == 4 and state.changed_at == 62.0


def test_drain_cores_come_only_from_idle_cores():
    # On five cores, the emulator pool's and the four committed leave
    # none idle: the grow is to four, with nothing to give back.
    decisions = []
    cores, _ = _step(300.0, host_cores=5, decisions=decisions)
    assert cores[:3] == [1, 4, 4]
    assert decisions[0].action == 'grow' and decisions[0].new == 4
    assert 'drained' not in [d.action for d in decisions]


def test_counters_with_packets_but_no_bytes_teach_no_ratio():
    # Packets out and not a byte: the usual ratio would become 0, and
    # every later sample is divided by it.
    detector = _Detector(ControllerConfig())
    assert not detector.update(5000.0, 5000.0, False, 0.0, size_out=0.0)
    assert detector.usual is None
    assert not detector.update(5000.0, 5000.0, False, 1.0, size_in=0.5)
    assert detector.usual is None
    assert not detector.update(5000.0, 5000.0, True, 2.0)
    assert detector.served(_traffic(5000.0, 5000.0)) is None
    # Counters that make sense again teach it as before.
    for t in range(3, 6):
        assert not detector.update(5000.0, 5000.0, False, float(t))
    assert detector.usual == 1.0
    assert not detector.update(5000.0, 5000.0, True, 7.0, size_out=0.0)
    assert detector.usual == 1.0
