"""QoS-target mode: cores that follow the guest's own tail latency."""

import pytest

from ufo_agent.controller import Controller
from ufo_agent.controller import ControllerConfig
from ufo_agent.controller import emulator
from ufo_agent.controller import HostTopology
from ufo_agent.controller import latency
from ufo_agent.controller import VmSample
from ufo_agent.controller import VmSpec

TARGET = 500.0


class Host:
    """A controller and its ticks, one VM sample dict per second."""

    def __init__(self, cores=8, specs=(VmSpec('a', 8, 'lc',
                                              latency_target_us=TARGET),),
                 config=None):
        self.controller = Controller(HostTopology.uniform(cores, 2), config)
        for spec in specs:
            self.controller.add_vm(spec)
        self.t = 0
        self.decisions = []
        self.plan = None

    def run(self, seconds, emulator_busy=10.0, **samples):
        for _ in range(seconds):
            self.plan = self.controller.tick(float(self.t), samples,
                                             emulator_busy)
            self.decisions += self.plan.decisions
            self.t += 1
        return self.plan

    def cores(self, uuid='a'):
        return len(self.plan.vms[uuid].cores)

    def rules(self, uuid='a'):
        return [d.reason.rule for d in self.decisions if d.vm == uuid]

    def pool(self):
        return len(self.plan.emulator_cores)


def sample(latency_us, util=150.0):
    return VmSample(util, 20000.0, latency_us=latency_us)


def shrunk_to_one():
    """A host whose guest's slack took it down to one core."""
    host = Host()
    host.run(30, a=sample(200.0))
    assert host.cores() == 1
    return host


def test_slack_under_the_target_shrinks_by_trial_and_keeps_what_holds():
    host = Host()
    host.run(1, a=sample(200.0))
    assert host.cores() == 4            # its flavor, as every new VM
    host.run(30, a=sample(200.0))       # 0.4 x the target
    assert host.cores() == 1
    trials = [d for d in host.decisions if d.vm == 'a' and
              d.reason.rule == latency.SLACK_TRIAL]
    assert [(d.old, d.new) for d in trials] == [(4, 3), (3, 2), (2, 1)]
    assert host.rules().count(latency.TRIAL_ACCEPT) == 3


def test_latency_within_the_slack_band_holds_the_cores():
    host = Host()
    host.run(30, a=sample(0.8 * TARGET))
    assert host.cores() == 4
    assert host.plan.vms['a'].note.rule == latency.IN_BAND


def test_a_violation_grows_on_confirmation_to_the_flavor_at_most():
    host = shrunk_to_one()
    host.run(1, a=sample(3 * TARGET))
    assert host.cores() == 1            # one second is not a step
    host.run(1, a=sample(3 * TARGET))
    assert host.cores() == 2
    grow = host.decisions[-1]
    assert (grow.action, grow.reason.rule) == ('grow', latency.VIOLATION)
    host.run(30, a=sample(3 * TARGET))
    assert host.cores() == 4
    assert host.plan.vms['a'].note.rule == latency.FLAVOR_MAX


def test_a_violation_on_a_tick_the_pool_grows_counts_toward_the_grow():
    # A step's I/O grows the emulator pool on its first second (Memcached
    # 10 % -> 80 % at 130 s of the dynamic run): that second's violation
    # is the first of the two the grow needs, as in black-box mode.
    host = shrunk_to_one()
    assert host.pool() == 1
    host.run(1, emulator_busy=190.0, a=sample(3 * TARGET))
    assert host.pool() == 2
    assert host.cores() == 1
    host.run(1, emulator_busy=150.0, a=sample(3 * TARGET))
    assert host.cores() == 2
    grow = host.decisions[-1]
    assert (grow.action, grow.reason.rule) == ('grow', latency.VIOLATION)


def test_a_violation_on_a_tick_the_pool_grows_does_not_move_alone():
    # One violating second (a burst) on a pool grow moves nothing.
    host = shrunk_to_one()
    host.run(1, emulator_busy=190.0, a=sample(3 * TARGET))
    host.run(10, emulator_busy=150.0, a=sample(200.0))
    assert host.cores() == 1


def _traffic_step(drain_latency_us, drain_ticks=1, load=300.0):
    """A guest on one core whose load steps to ``load`` %, by its traffic.

    Its latency is 20 times the target while short of cores and
    ``drain_latency_us`` on the ``drain_ticks`` ticks after its grow
    (its drain cores run on the first). Returns the host and, tick by
    tick from the step: the cores the guest holds, its note's rule and
    the cores it has committed.
    """
    host = Host()
    held, drained = [], 0
    for t in range(70):
        have = host.cores() if host.plan else 4
        util = min(40.0 if t < 60 else load, 200.0 * have)
        answered = 3000.0 * util / (40.0 if t < 60 else load)
        if t < 60:
            latency_us = 200.0
        elif host.controller.vms['a'].drain_back is not None or drained:
            latency_us = drain_latency_us if drained < drain_ticks \
                else 200.0
            drained += 1
        else:
            latency_us = 20 * TARGET
        host.run(1, a=VmSample(util, 9000.0, packets_in=3000.0,
                               packets_out=answered,
                               bytes_in=3000.0 * 100,
                               bytes_out=answered * 100,
                               latency_us=latency_us))
        if t >= 60:
            held.append((host.cores(), host.plan.vms['a'].note.rule,
                         host.controller.vms['a'].committed))
    return host, held


def test_drain_cores_stay_a_tick_more_while_the_latency_is_late():
    # Two ticks answering two-thirds of 300 % left 200 % queued: the
    # grow to the demand's two cores gets one more for a tick. On it the
    # queue still answers late (Nginx's 20 % -> 40 % step in the dynamic
    # run missed its target on the second after that tick): it stays a
    # tick more, and goes back once the latency meets the target.
    host, held = _traffic_step(3 * TARGET)
    assert [cores for cores, _, _ in held[:5]] == [1, 3, 3, 2, 2]
    assert held[2][1] == latency.DRAIN_KEPT
    # Not committed: a neighbour's committed demand may take it.
    assert host.controller.vms['a'].committed == 2


def test_drain_cores_stay_no_longer_than_settle_time():
    _, held = _traffic_step(3 * TARGET, drain_ticks=10)
    assert [cores for cores, _, _ in held[:5]] == [1, 3, 3, 3, 2]


def test_drain_cores_go_back_when_the_latency_on_them_meets_the_target():
    _, held = _traffic_step(200.0)
    assert [cores for cores, _, _ in held[:5]] == [1, 3, 2, 2, 2]


def test_a_violation_commits_what_the_traffic_says_the_step_needs():
    # Saturated on one core, the guest answers 200 % of 450 %: its
    # utilization says two cores at pcu_high, its traffic (the host's
    # reading, which black-box grows commit on) three. A neighbour's
    # committed demand or the pool took the third, speculative, core
    # (Memcached's 10 % -> 80 % step at 187 s, load scale 0.8, on 8
    # cores: 7-9 violation seconds).
    _, held = _traffic_step(200.0, load=450.0)
    assert held[1][0] >= 3
    assert held[1][2] == 3


def test_a_violation_grows_to_what_the_demand_needs():
    host = shrunk_to_one()
    # 190 % on one core of two CPUs, all its traffic answered: 95 % per
    # CPU; at pcu_high that is two cores, one more is the same.
    host.run(2, a=sample(3 * TARGET, util=600.0))
    assert host.cores() == 4


def test_a_trial_that_violates_goes_back_and_is_not_retried():
    host = Host()
    host.run(5, a=sample(200.0))
    assert host.cores() == 3            # trial from 4, at t=4
    # The first second after a move may spike, whatever the cores.
    host.run(1, a=sample(2 * TARGET))
    host.run(1, a=sample(200.0))
    assert host.cores() == 3
    host.run(1, a=sample(2 * TARGET))   # settled: one sample is enough
    assert host.cores() == 4
    revert = host.decisions[-1]
    assert (revert.action, revert.reason.rule) == \
        ('revert', latency.TRIAL_REVERT)
    host.run(30, a=sample(200.0))
    # The same shrink at the same load was undone: it waits.
    assert host.cores() == 4
    assert host.rules().count(latency.SLACK_TRIAL) == 1


def test_an_unsettled_trial_goes_back_on_two_violating_samples():
    host = Host()
    host.run(5, a=sample(200.0))
    host.run(2, a=sample(2 * TARGET))
    assert host.cores() == 4
    assert host.decisions[-1].reason.rule == latency.TRIAL_REVERT


def test_no_trial_onto_cores_the_work_does_not_fit():
    host = Host()
    host.run(30, a=sample(200.0, util=500.0))
    # 500 % needs three cores of two CPUs, whatever the latency says.
    assert host.cores() == 3
    assert host.plan.vms['a'].note.rule == latency.PCU_GUARD


def _black_box_cores(latency_us, specs):
    host = Host(specs=specs)
    counts = []
    for t in range(60):
        util = 150.0 if t < 30 else 600.0
        sf = 20000.0 - 10.0 * util
        host.run(1, a=VmSample(util, sf, latency_us=latency_us))
        counts.append(host.cores())
    return host, counts


def test_without_a_fresh_latency_the_black_box_rules_decide():
    _, plain = _black_box_cores(None, (VmSpec('a', 8, 'lc'),))
    host, stale = _black_box_cores(None, (VmSpec(
        'a', 8, 'lc', latency_target_us=TARGET),))
    assert stale == plain
    assert host.plan.vms['a'].note.rules()[0] == latency.STALE
    # A latency without a target is not read.
    _, unread = _black_box_cores(100.0, (VmSpec('a', 8, 'lc'),))
    assert unread == plain


def test_a_latency_gone_stale_hands_back_to_the_black_box_rules():
    host = shrunk_to_one()
    host.run(20, a=VmSample(600.0, 15000.0))
    # PCU 150 % on one core: the paper's rule grows it.
    assert host.cores() > 1
    assert latency.STALE in host.plan.vms['a'].note.rules()


def test_a_guest_silent_after_a_lie_gets_what_the_black_box_rules_give():
    # Lied up to its flavor at a light load, then silent at that load:
    # the black-box rules shrink it as they did before the lie. (Their
    # guard against a shrink grown back took the lie's grow for one.)
    host = Host()
    light = VmSample(60.0, 20000.0)
    host.run(40, a=light)
    assert host.cores() == 1
    host.run(20, a=VmSample(60.0, 20000.0, latency_us=50 * TARGET))
    assert host.cores() == 4
    host.run(30, a=light)
    assert host.cores() == 1
    shrinks = [d for d in host.decisions[-30:] if d.new < d.old]
    assert shrinks and all(latency.STALE in d.reason.rules() and
                           not d.reason.rule.startswith('latency-')
                           for d in shrinks)


def test_a_lying_guest_holds_its_flavor_at_most_and_no_committed_core():
    liar = VmSpec('liar', 8, 'lc', latency_target_us=TARGET)
    host = Host(cores=6, specs=(liar, VmSpec('web', 8, 'lc')))
    held = []
    for t in range(60):
        web = VmSample(200.0 if t < 20 else 700.0, 20000.0)
        host.run(1, liar=VmSample(50.0, 3000.0, latency_us=50 * TARGET),
                 web=web)
        held.append(host.cores('liar'))
    assert max(held) <= 4
    assert max(held[:20]) == 3          # idle cores, while nobody wants them
    # The neighbour's committed demand takes them back.
    assert host.cores('web') == 4 and host.cores('liar') == 1
    assert host.controller.vms['liar'].committed == 1


def test_latency_slack_is_checked():
    with pytest.raises(ValueError, match='latency_slack'):
        ControllerConfig(latency_slack=1.0)
    host = Host(config=ControllerConfig(latency_slack=0.3))
    host.run(30, a=sample(0.4 * TARGET))
    assert host.cores() == 4


def test_no_trial_back_to_the_cores_a_violation_grew_from():
    host = shrunk_to_one()
    host.run(2, a=sample(3 * TARGET))
    assert host.cores() == 2
    host.run(30, a=sample(200.0))
    assert host.cores() == 2
    # Until the load falls.
    host.run(30, a=sample(200.0, util=100.0))
    assert host.cores() == 1


def test_a_reverted_trial_waits_even_when_it_read_busier():
    host = Host()
    host.run(5, a=sample(200.0))
    assert host.cores() == 3            # trial from 4
    # Saturated on the trial, the guest reads far busier than before.
    host.run(2, a=sample(50 * TARGET, util=590.0))
    assert host.cores() == 4
    host.run(30, a=sample(200.0))
    assert host.cores() == 4
    assert host.rules().count(latency.SLACK_TRIAL) == 1


def test_a_pool_yields_a_core_to_a_guest_short_and_over_its_target():
    # Memcached 60 % + 60 % on seed 1 (traced): each guest needs three
    # cores, which beside a pool of three leaves one of them on two,
    # ten times over its target at 87.5 % of its CPUs. Only a guest at
    # emulator_util_overload (95 %) got a core from the pool, which runs
    # at 58 % of three cores; the guest's own latency says it is short.
    specs = [VmSpec(u, 8, 'lc', latency_target_us=TARGET) for u in 'ab']
    host = Host(specs=specs,
                config=ControllerConfig(emulator_util_overload=0.95))
    held = []
    for t in range(40):
        samples = {}
        for uuid in 'ab':
            cores = len(host.controller.vms[uuid].cores) or 4
            samples[uuid] = VmSample(
                350.0, 20000.0, emulator=20.0, emulator_threads=1,
                latency_us=(0.4 if cores >= 3 else 10.0) * TARGET)
        host.plan = host.controller.tick(float(t), samples,
                                         420.0 if t < 10 else 350.0)
        held.append((len(host.plan.emulator_cores), host.cores('a'),
                     host.cores('b')))
    assert held[-10:] == [(2, 3, 3)] * 10


def test_a_reverted_trial_commits_the_cores_its_work_keeps_busy():
    # A new VM's flavor-size cores are not committed; a trial taken from
    # them and reverted committed only its one core, and the cores it
    # went back to were any neighbour's for the asking (Memcached 60 % +
    # 60 %, seed 1: the neighbour's grow took the core the trial left).
    host = Host()
    host.run(5, a=sample(200.0))
    assert host.cores() == 3            # trial from 4, one committed
    host.run(2, a=sample(50 * TARGET, util=590.0))
    assert host.cores() == 4
    # 590 % at pcu_high (80 % of two CPUs a core) is four cores.
    assert host.controller.vms['a'].committed == 4


# Emulator threads at 170 % of one CPU: 43 % of a two-core pool, which
# the band keeps (85 % projected on one core is over emulator_util_high)
# as Memcached 30 % + 30 % and Nginx + MySQL kept theirs at 44-47 %.
POOL_BUSY = 170.0


def pool_host(reporting='ab'):
    """Two guests on a two-core pool; those in ``reporting`` have slack.

    The others have no latency target: black-box guests.
    """
    specs = [VmSpec(u, 8, 'lc', latency_target_us=TARGET
                    if u in reporting else None) for u in 'ab']
    host = Host(specs=specs)
    host.run(40, emulator_busy=POOL_BUSY, a=sample(200.0), b=sample(200.0))
    return host


def test_a_pool_whose_guests_all_have_slack_shrinks_by_trial():
    host = pool_host()
    assert host.pool() == 1
    assert host.rules('emulator') == [emulator.BAND,
                                      emulator.LATENCY_POOL_TRIAL]
    # At 85 % of one core the band would grow it back: latency holds it.
    host.run(30, emulator_busy=POOL_BUSY, a=sample(200.0), b=sample(200.0))
    assert host.pool() == 1
    assert host.plan.decisions == ()


def test_a_guest_over_its_target_reverts_the_pool_for_good_at_that_load():
    host = pool_host()
    assert host.pool() == 1
    host.run(1, emulator_busy=POOL_BUSY, a=sample(200.0),
             b=sample(2 * TARGET))
    assert host.pool() == 2
    revert = host.decisions[-1]
    assert (revert.action, revert.reason.rule) == (
        'emulator-grow', emulator.LATENCY_POOL_REVERT)
    # The guest's own grow is confirmed on the next second, as on a
    # tick the pool does not grow.
    host.run(1, emulator_busy=POOL_BUSY, a=sample(200.0),
             b=sample(2 * TARGET))
    assert host.cores('b') == 2
    host.run(120, emulator_busy=POOL_BUSY, a=sample(200.0),
             b=sample(200.0))
    assert host.pool() == 2
    assert host.rules('emulator').count(emulator.LATENCY_POOL_TRIAL) == 1


def test_a_pool_with_a_black_box_guest_keeps_its_band():
    mixed = pool_host(reporting='a')
    assert mixed.pool() == 2
    assert mixed.rules('emulator') == [emulator.BAND]
    assert pool_host(reporting='ab').pool() == 1


def test_a_report_gone_stale_ends_the_pool_trial():
    host = pool_host()
    assert host.pool() == 1
    host.run(1, emulator_busy=POOL_BUSY, a=sample(200.0), b=sample(None))
    assert host.pool() == 2
    assert host.rules('emulator')[-1] == emulator.BAND
    assert emulator.LATENCY_POOL_REVERT not in host.rules('emulator')


def test_a_guests_trial_waits_while_the_pools_is_judged():
    specs = [VmSpec(u, 8, 'lc', latency_target_us=TARGET) for u in 'ab']
    host = Host(specs=specs)
    host.run(4, emulator_busy=POOL_BUSY, a=sample(200.0), b=sample(200.0))
    assert (host.pool(), host.cores('a'), host.cores('b')) == (1, 3, 3)
    assert host.plan.vms['a'].note.rule == latency.POOL_TRIAL
    # Once the pool's trial has settled, the guests' own trials go ahead.
    host.run(5, emulator_busy=POOL_BUSY, a=sample(200.0), b=sample(200.0))
    assert (host.pool(), host.cores('a'), host.cores('b')) == (1, 2, 2)
