"""A VM working off a backlog: told from its traffic, its grows wait."""

import dataclasses

from ufo_agent.controller import backlog
from ufo_agent.controller import Controller
from ufo_agent.controller import ControllerConfig
from ufo_agent.controller import HostTopology
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
    assert 'draining a backlog' in controller.vms['web'].last_action[1]


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
