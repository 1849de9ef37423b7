"""The enforcer's ordering, idempotence and rollback."""

import dataclasses
import random

import pytest

from ufo_agent.controller import config as controller_config
from ufo_agent.controller import Controller
from ufo_agent.controller import HostTopology
from ufo_agent.controller import plan as plans
from ufo_agent.controller import VmSample
from ufo_agent.controller import VmSpec
from ufo_agent.service import enforcer
from ufo_agent.tests.unit.service import fakes


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def _setup(*guests, cores=8, cls=enforcer.Enforcer):
    driver = fakes.FakeDriver(cores=cores)
    driver.strict_emulator = True
    controller = Controller(HostTopology(driver.siblings))
    clock = _Clock()
    enf = cls(driver, ack_timeout=0.5, ack_wait=0.1, clock=clock,
              sleep=clock.sleep)
    for guest in guests:
        driver.add(guest)
        controller.add_vm(VmSpec(guest.info.uuid, guest.info.vcpus, 'lc'))
        enf.track(guest.info)
    return driver, controller, enf


def _online(driver):
    """What every guest reports online on its page."""
    return {u: g.online for u, g in driver.all.items()}


def _plan(controller, t, utils):
    return controller.tick(t, {u: VmSample(v, 1000.0)
                               for u, v in utils.items()}, 10.0)


def test_shrink_tells_the_guest_first_and_grow_tells_it_last():
    a = fakes.FakeGuest('a', 8)
    driver, controller, enf = _setup(a)
    enf.apply(_plan(controller, 0.0, {'a': 100.0}), _online(driver))
    assert a.vcpu_pins == controller.topology.cpus_of(
        controller.vms['a'].cores)
    driver.calls.clear()
    # Force a shrink: 4 cores -> the controller's probe to 3 (two
    # samples in a row call for it).
    _plan(controller, 3.0, {'a': 100.0})
    plan = _plan(controller, 4.0, {'a': 100.0})
    assert len(plan.vms['a'].cores) == 3
    enf.apply(plan, {'a': 8})
    kinds = [c[0] for c in driver.calls]
    assert kinds.index('target') < kinds.index('pin_vcpus')
    assert ('target', 'a', 6) in driver.calls
    driver.calls.clear()
    # Saturated: grow back; pins widen before the guest onlines.
    plan = _plan(controller, 7.0, {'a': 560.0})
    assert len(plan.vms['a'].cores) == 4
    enf.apply(plan, {'a': 6})
    kinds = [c[0] for c in driver.calls]
    assert kinds.index('pin_vcpus') < kinds.index('target')


def _answer_after(driver, clock, delay):
    """The guests answer a target ``delay`` s of ``clock`` after it."""
    sent = {}
    send = driver.set_vcpu_target

    def set_vcpu_target(uuid, vcpus):
        seq = send(uuid, vcpus)
        sent[uuid, seq] = clock.now
        return seq

    def acknowledged(uuid, seq):
        return clock.now >= sent.get((uuid, seq), clock.now) + delay

    driver.set_vcpu_target = set_vcpu_target
    driver.acknowledged = acknowledged


def _b_probed_as_a_shrinks(delay, max_vcpu_step=8):
    """Guest a is to shrink and b, restarted, to be proven again.

    Both answer a target ``delay`` s after it. Returns (driver, the
    enforcer, a, the plan).
    """
    a, b = fakes.FakeGuest('a', 8), fakes.FakeGuest('b', 8)
    driver, controller, enf = _setup(a, b)
    enf.max_vcpu_step = max_vcpu_step
    utils = {'a': 100.0, 'b': 700.0}
    enf.apply(_plan(controller, 0.0, utils), _online(driver))
    _plan(controller, 3.0, utils)
    plan = _plan(controller, 4.0, utils)
    assert plan.vms['a'].online_vcpus < 7
    assert plan.vms['b'].online_vcpus == 8
    enf.invalidate('b')
    _answer_after(driver, enf.clock, delay)
    driver.calls.clear()
    return driver, enf, a, plan


def test_a_probe_and_a_shrink_are_waited_for_together():
    # Defect: the shrinks were sent only once the probes were answered,
    # and a tick waited for the one, then the other.
    driver, enf, a, plan = _b_probed_as_a_shrinks(0.028)
    before = enf.clock.now
    outcome = enf.apply(plan, _online(driver))
    assert ('target', 'b', 8) in driver.calls
    assert ('target', 'a', plan.vms['a'].online_vcpus) in driver.calls
    assert enf.ack_state('b') == 'proven' and outcome.deferred == {}
    assert a.vcpu_pins == plan.vms['a'].cpus
    # One wait for both answers (it took two: 60 ms).
    assert enf.clock.now - before < 0.04


def test_a_probe_nobody_answers_holds_no_other_guest_shrink():
    # Defect: the shrinks went out once the probes' wait was over; a
    # probe never answered took the whole deadline, and every shrinking
    # guest kept its pins another tick.
    driver, enf, a, plan = _b_probed_as_a_shrinks(0.028)
    answers = driver.acknowledged
    driver.acknowledged = lambda uuid, seq: uuid != 'b' and answers(
        uuid, seq)
    outcome = enf.apply(plan, _online(driver))
    assert 'a' not in outcome.deferred
    assert a.vcpu_pins == plan.vms['a'].cpus


def test_one_shrink_step_a_tick_when_a_probe_is_waited_for():
    # A shrink answered while a probe is waited for is not followed by
    # another step in the same tick.
    driver, enf, _, plan = _b_probed_as_a_shrinks(0.01, max_vcpu_step=1)
    enf.apply(plan, _online(driver))
    assert [c for c in driver.calls if c[:2] == ('target', 'a')] == [
        ('target', 'a', 7)]


def test_nothing_is_rewritten_when_nothing_changed():
    a, b = fakes.FakeGuest('a', 4), fakes.FakeGuest('b', 4)
    driver, controller, enf = _setup(a, b)
    plan = _plan(controller, 0.0, {'a': 100.0, 'b': 100.0})
    first = enf.apply(plan, _online(driver))
    assert first.pinned == 4 and first.targets == 2
    driver.calls.clear()
    again = enf.apply(plan, _online(driver))
    assert (again.pinned, again.targets, driver.calls) == (0, 0, [])
    enf.invalidate('a')
    enf.apply(plan, _online(driver))
    assert {c[1] for c in driver.calls} == {'a'}


def test_cores_move_between_guests_without_ever_overlapping():
    # a shrinks and b grows in the same tick, into a's old cores; the
    # fake driver asserts isolation after every single pin.
    a, b = fakes.FakeGuest('a', 8), fakes.FakeGuest('b', 8)
    driver, controller, enf = _setup(a, b, cores=6)
    utils = {'a': 100.0, 'b': 100.0}
    for t in range(40):
        if t == 20:
            utils = {'a': 20.0, 'b': 700.0}
        plan = _plan(controller, float(t), utils)
        enf.apply(plan, {u: g.online for u, g in driver.all.items()})
        for uuid, guest in driver.all.items():
            assert guest.vcpu_pins == plan.vms[uuid].cpus
            assert guest.emulator_pins == plan.emulator_cpus
            assert guest.online == plan.vms[uuid].online_vcpus
    assert len(plan.vms['b'].cores) > len(plan.vms['a'].cores)


def test_a_guest_that_never_answers_gets_no_shrink_and_stalls_nothing():
    # Defect: every guest without the module got shrink targets, and each
    # tick waited ack_timeout for it and rolled back, for every guest.
    stuck = fakes.FakeGuest('a', 8, acks=False)
    other = fakes.FakeGuest('b', 8)
    driver, controller, enf = _setup(stuck, other)
    waited = 0.0
    for t in range(40):
        plan = _plan(controller, float(t), {'a': 100.0, 'b': 100.0})
        before = enf.clock.now
        outcome = enf.apply(plan, {u: g.online
                                   for u, g in driver.all.items()})
        waited = max(waited, enf.clock.now - before)
        enf.clock.now += 1.0
        assert stuck.vcpu_pins == plan.vms['a'].cpus   # host pins apply
        assert other.online == plan.vms['b'].online_vcpus
        driver.check_isolation()
    targets = [c[2] for c in driver.calls if c[:2] == ('target', 'a')]
    # Only targets that change nothing: the probe and the rollback.
    assert targets and set(targets) == {8}
    assert enf.ack_state('a') == 'host-only'
    assert enf.ack_state('b') == 'proven'
    assert waited <= enf.ack_wait + 0.01
    assert outcome.failed == {}


def test_host_only_guest_is_asked_again_after_a_growing_backoff():
    stuck = fakes.FakeGuest('a', 4, acks=False)
    driver, controller, enf = _setup(stuck)
    probes = []
    for t in range(200):
        plan = _plan(controller, float(t), {'a': 100.0})
        outcome = enf.apply(plan, _online(driver))
        if outcome.fallbacks:
            probes.append(t)
        enf.clock.now += 1.0
    gaps = [b - a for a, b in zip(probes, probes[1:])]
    assert len(probes) >= 3 and gaps == sorted(gaps) and gaps[-1] > gaps[0]
    stuck.acks = True                   # the module was loaded meanwhile
    for t in range(200, 400):
        enf.apply(_plan(controller, float(t), {'a': 100.0}),
                  _online(driver))
        enf.clock.now += 1.0
    assert enf.ack_state('a') == 'proven'


def test_a_guest_without_a_valid_page_is_not_probed_nor_punished():
    booting = fakes.FakeGuest('a', 4, acks=False)
    driver, controller, enf = _setup(booting)
    for t in range(10):
        # Its module is not bound yet: no valid report, so no probe.
        outcome = enf.apply(_plan(controller, float(t), {'a': 100.0}), {})
        assert outcome.fallbacks == ()
        enf.clock.now += 1.0
    assert not [c for c in driver.calls if c[0] == 'target']
    assert enf.ack_state('a') == 'unproven'
    booting.acks = True
    enf.apply(_plan(controller, 10.0, {'a': 100.0}), _online(driver))
    assert enf.ack_state('a') == 'proven'


def test_unanswered_shrink_keeps_the_cpus_until_the_guest_falls_back():
    a, b = fakes.FakeGuest('a', 8), fakes.FakeGuest('b', 8)
    driver, controller, enf = _setup(a, b, cores=6)
    utils = {'a': 700.0, 'b': 100.0}
    t = 0
    for t in range(8):
        plan = _plan(controller, float(t), utils)
        enf.apply(plan, {u: g.online for u, g in driver.all.items()})
        enf.clock.now += 1.0
    a_cpus = a.vcpu_pins
    a.acks = False                      # a hangs from now on
    utils = {'a': 10.0, 'b': 700.0}
    deferred_seen = False
    for t in range(t + 1, t + 30):
        plan = _plan(controller, float(t), utils)
        outcome = enf.apply(plan, {u: g.online
                                   for u, g in driver.all.items()})
        if 'a' in outcome.deferred:
            deferred_seen = True
            # a keeps its CPUs and b may not have any of them meanwhile.
            assert a.vcpu_pins == a_cpus
            assert not b.vcpu_pins & a_cpus
        if outcome.fallbacks:
            assert outcome.fallbacks == ('a',)
            assert 'no acknowledgement' in outcome.failed['a']
            assert ('target', 'a', 8) in driver.calls
        driver.check_isolation()
        enf.clock.now += 1.0
    assert deferred_seen
    assert enf.ack_state('a') == 'host-only'
    assert a.vcpu_pins == plan.vms['a'].cpus
    assert b.vcpu_pins == plan.vms['b'].cpus


def test_a_guest_found_on_every_cpu_is_placed_before_its_shrink_answer():
    # A restarted agent finds a on its definition (every managed CPU,
    # b's core too) and b on its own core. The plan parks a with 2 of
    # its 4 vCPUs online; a answers the probe at once, the shrink only
    # after the tick's wait. Kept until then, a's pins are b's core:
    # a is placed at once, on its own CPUs only until it answers.
    driver = fakes.FakeDriver(cores=4)
    # Found overlapping: judged once the pass is done.
    driver.check_isolation = lambda: None
    enf = enforcer.Enforcer(driver, ack_wait=0.1)
    every = frozenset({1, 2, 3, 5, 6, 7})
    a = driver.add(fakes.FakeGuest('a', 4))
    a.vcpu_pins = a.emulator_pins = every
    enf.track(a.info)
    b = driver.add(fakes.FakeGuest('b', 2, channel=False))
    b.vcpu_pins, b.emulator_pins = frozenset({2, 6}), every
    enf.track(b.info)
    plan = _host_plan(4, {'a': (), 'b': {2}}, {3})
    real_target = driver.set_vcpu_target

    def set_vcpu_target(uuid, vcpus):
        # Only targets that take vCPUs offline are answered late.
        driver.all[uuid].acks = vcpus >= driver.all[uuid].online
        return real_target(uuid, vcpus)

    driver.set_vcpu_target = set_vcpu_target
    outcome = enf.apply(plan, {'a': 4})
    assert ('target', 'a', 2) in driver.calls and a.online == 4
    assert enf.acks['a'].shrinking
    _isolated(driver, plan.shared_cpus)
    assert a.vcpu_pins == plan.vms['a'].cpus
    assert b.vcpu_pins == plan.vms['b'].cpus
    assert outcome.deferred == {} and outcome.failed == {}
    assert enf.ledger.get(('b', 'vcpu')).pool == 'vm:b'
    # Its answer comes: nothing more to pin.
    a.online, a.acked_seq = 2, a.target_seq
    driver.calls.clear()
    outcome = enf.apply(plan, {'a': 2})
    assert not enf.acks['a'].waiting
    assert not [c for c in driver.calls if c[0].startswith('pin')]
    assert outcome.deferred == {} and outcome.failed == {}


def test_failed_narrow_keeps_the_other_guest_from_widening():
    # Defect: A's narrow failed (libvirt's state change lock takes 30 s),
    # B was widened onto A's cores anyway: two guests on one CPU.
    a, b = fakes.FakeGuest('a', 8), fakes.FakeGuest('b', 8)
    driver, controller, enf = _setup(a, b, cores=6)
    utils = {'a': 700.0, 'b': 100.0}
    for t in range(8):
        plan = _plan(controller, float(t), utils)
        enf.apply(plan, {u: g.online for u, g in driver.all.items()})
        enf.clock.now += 1.0
    a_cpus = a.vcpu_pins
    driver.fail_pin.add('a')
    utils = {'a': 10.0, 'b': 700.0}
    moved = False
    for t in range(8, 30):
        plan = _plan(controller, float(t), utils)
        enf.apply(plan, {u: g.online for u, g in driver.all.items()})
        enf.clock.now += 1.0
        assert a.vcpu_pins == a_cpus
        assert not b.vcpu_pins & a_cpus
        moved |= plan.vms['b'].cpus & a_cpus != frozenset()
    assert moved            # the plan did give b some of a's cores
    driver.fail_pin.clear()
    plan = _plan(controller, 30.0, utils)
    enf.apply(plan, {u: g.online for u, g in driver.all.items()})
    assert (a.vcpu_pins, b.vcpu_pins) == (plan.vms['a'].cpus,
                                          plan.vms['b'].cpus)


def _small_host(pins):
    """Two single-thread cores, small-host settings, guests on ``pins``.

    ``pins`` maps a guest to the CPUs its vCPUs run on when the agent
    starts (Nova's: both CPUs; a crashed agent's: one).
    """
    driver = fakes.FakeDriver(cores=2, threads=1)
    # Threads of VMs without cores float over every CPU: checked below.
    driver.check_isolation = lambda: None
    config = dataclasses.replace(controller_config.ControllerConfig(),
                                 emulator_min_cores=0,
                                 idle_pool_min_cores=0, idle_after=3.0)
    controller = Controller(HostTopology(driver.siblings), config)
    clock = _Clock()
    enf = enforcer.Enforcer(driver, ack_timeout=0.5, ack_wait=0.1,
                            clock=clock, sleep=clock.sleep)
    every = frozenset({0, 1})
    for uuid, cpus in sorted(pins.items()):
        guest = fakes.FakeGuest(uuid, 2)
        guest.info = dataclasses.replace(guest.info, restore_vcpu_cpus=every,
                                         restore_emulator_cpus=every)
        guest.vcpu_pins, guest.emulator_pins = frozenset(cpus), every
        driver.add(guest)
        controller.add_vm(VmSpec(uuid, 2, 'lc'))
        enf.track(guest.info)
    return driver, controller, enf


def _check_small_host(driver, enf, plan):
    """As _check_ledger, but the shared pool floats while it is every CPU.

    Without an idle core the plan puts the VMs without cores (and the
    emulator threads) on every managed CPU: they may run beside any pool.
    Every other pool's CPUs are its own.
    """
    floating = not plan.idle_cpus
    actual = {}
    for uuid, guest in driver.all.items():
        actual[(uuid, 'vcpu')] = guest.vcpu_pins
        actual[(uuid, 'emulator')] = guest.emulator_pins
    for key, cpus in actual.items():
        assert cpus <= enf.ledger.get(key).cpus, key
    for key, entry in ((k, enf.ledger.get(k)) for k in actual):
        if entry.pool is None or not (entry.pool.startswith('vm:') or
                                      entry.pool == 'emulator'):
            continue
        for other, cpus in actual.items():
            parts = enf.ledger.get(other).parts
            if other == key or all(
                    pool == entry.pool or (floating and pool == 'shared')
                    for pool, _ in parts):
                continue
            assert not cpus & entry.cpus, (key, entry, other, cpus)


@pytest.mark.parametrize('start', [
    {'a': {0, 1}, 'b': {0, 1}, 'c': {0, 1}},    # as Nova started them
    {'a': {1}, 'b': {0}, 'c': {0, 1}},          # swapped by a crash
])
def test_small_host_without_idle_core_enforces_every_plan(start):
    # Defect: with idle_pool_min_cores = 0 and a VM without cores, the
    # shared CPUs are every managed CPU, and the ledger made every VM
    # wait for them forever: active VMs never got their own cores (after
    # a swap both kept running on the other's).
    driver, controller, enf = _small_host(start)
    utils = {'a': 190.0, 'b': 190.0, 'c': 0.0}
    moves = 0
    for t in range(45):
        if t == 15:
            utils = {'a': 190.0, 'b': 0.0, 'c': 0.0}
        elif t == 30:
            utils = {'a': 0.0, 'b': 190.0, 'c': 90.0}
        before = {u: g.vcpu_pins for u, g in driver.all.items()}
        plan = _plan(controller, float(t), utils)
        driver.before_pin[:] = [lambda: _check_small_host(driver, enf,
                                                          plan)]
        outcome = enf.apply(plan, _online(driver))
        _check_small_host(driver, enf, plan)
        assert outcome.deferred == {} and outcome.failed == {}, t
        for uuid, guest in driver.all.items():
            assert guest.vcpu_pins == plan.vms[uuid].cpus, (t, uuid)
            assert guest.emulator_pins == plan.emulator_cpus
        moves += sum(before[u] != g.vcpu_pins for u, g in driver.all.items())
        enf.clock.now += 1.0
    assert moves >= 4


def _host_plan(cores, vms, shared, emulator=frozenset({0})):
    """A plan on a host of ``cores`` SMT pairs (CPUs c and c + cores).

    ``vms`` maps a guest to its cores (empty: parked on ``shared``, a
    set of cores that is the idle pool).
    """
    def cpus(ids):
        return frozenset(c + t * cores for c in ids for t in (0, 1))

    return plans.HostPlan(
        0.0, {uuid: plans.VmPlan(uuid, plans.VmMode.ACTIVE,
                                 frozenset(ids),
                                 cpus(ids) if ids else cpus(shared),
                                 2, len(ids), False)
              for uuid, ids in vms.items()},
        frozenset(emulator), cpus(emulator), frozenset(shared),
        cpus(shared), cores, 0.1, False, 0, (), cpus(shared))


def _found(driver, enf, pins, emulator):
    """Guests found running with exact pins (an agent's start)."""
    for uuid, cpus in sorted(pins.items()):
        guest = driver.add(fakes.FakeGuest(uuid, 2, channel=False))
        guest.vcpu_pins = frozenset(cpus)
        guest.emulator_pins = frozenset(emulator)
        enf.track(guest.info)


def _isolated(driver, shared):
    """No CPU in two pools, on the guests' actual pins.

    Guests inside the ``shared`` CPUs are parked together there; any
    other guest's CPUs are its own pool's. No vCPU runs on the emulators'
    CPUs.
    """
    emulator = frozenset().union(*[g.emulator_pins
                                   for g in driver.all.values()])
    pins = {u: g.vcpu_pins for u, g in driver.all.items()}
    for uuid, cpus in pins.items():
        assert not cpus & emulator, (uuid, cpus)
        for other, other_cpus in pins.items():
            if other != uuid and cpus != other_cpus and \
                    cpus & other_cpus:
                assert cpus | other_cpus <= shared, (uuid, other, pins)


def _enforce_until_done(driver, enf, plan, ticks=3):
    outcome = None
    check = lambda: _isolated(driver, plan.shared_cpus)  # noqa: E731
    driver.check_isolation = check
    driver.before_pin[:] = [check]
    for _ in range(ticks):
        outcome = enf.apply(plan)
        check()
    assert outcome.deferred == {} and outcome.failed == {}
    for uuid, guest in driver.all.items():
        assert guest.vcpu_pins == plan.vms[uuid].cpus, uuid
        assert guest.emulator_pins == plan.emulator_cpus, uuid


def test_guests_found_parked_together_move_to_their_own_cores():
    # A restarted agent finds a and b parked together on the idle pool
    # (core 3) and c on cores 1 and 2; its plan gives a core 1 and b
    # core 2 and parks c on core 3. Each of a and b may only move once c
    # left; c may only park once a and b count as parked there.
    driver = fakes.FakeDriver(cores=4)
    enf = enforcer.Enforcer(driver, ack_wait=0.0)
    _found(driver, enf, {'a': {3, 7}, 'b': {3, 7}, 'c': {1, 2, 5, 6}},
           {0, 4})
    plan = _host_plan(4, {'a': {1}, 'b': {2}, 'c': ()}, {3})
    _enforce_until_done(driver, enf, plan)


def test_guests_whose_cores_go_idle_swap_with_a_guest_that_parks():
    # a and b hold cores 1 and 2; the next plan parks c, gives a and b
    # c's cores and makes theirs idle: the shared CPUs are a's and b's
    # own until they move, and they move only once c has left.
    driver = fakes.FakeDriver(cores=6)
    enf = enforcer.Enforcer(driver, ack_wait=0.0)
    _found(driver, enf, {'a': {1, 7}, 'b': {2, 8}, 'c': {3, 4, 9, 10}},
           {0, 6})
    _enforce_until_done(driver, enf, _host_plan(
        6, {'a': {1}, 'b': {2}, 'c': {3, 4}}, {5}))
    assert enf.ledger.get(('a', 'vcpu')).pool == 'vm:a'
    _enforce_until_done(driver, enf, _host_plan(
        6, {'a': {3}, 'b': {4}, 'c': ()}, {1, 2, 5}))


def test_guests_found_over_the_idle_cpus_bound_elsewhere_leave_them_first():
    # Found after a restart: p parked on the idle core 5; x over cores 3
    # and 5, bound for core 2; y over cores 2 and 5, bound for core 3.
    # x and y wait for each other, and neither can be parked on the
    # idle core to break the cycle while the other still holds it: they
    # first narrow off the idle CPUs, where they were seen.
    driver = fakes.FakeDriver(cores=6)
    enf = enforcer.Enforcer(driver, ack_wait=0.0)
    found = {'p': {5, 11}, 'x': {3, 5, 9, 11}, 'y': {2, 5, 8, 11}}
    _found(driver, enf, found, {0, 6})
    plan = _host_plan(6, {'p': (), 'x': {2}, 'y': {3}}, {5})

    def check():
        # No two guests share a CPU they were not found sharing, but
        # for guests parked together on the idle CPUs.
        pins = {u: g.vcpu_pins for u, g in driver.all.items()}
        for uuid, cpus in pins.items():
            for other, other_cpus in pins.items():
                both = cpus & other_cpus
                if other != uuid and both and \
                        not cpus | other_cpus <= plan.shared_cpus:
                    assert both <= set(found[uuid]) & set(found[other]), \
                        (uuid, other, pins)

    driver.check_isolation = check
    driver.before_pin[:] = [check]
    for _ in range(4):
        outcome = enf.apply(plan)
        check()
    assert outcome.deferred == {} and outcome.failed == {}
    for uuid, guest in driver.all.items():
        assert guest.vcpu_pins == plan.vms[uuid].cpus, uuid


class _Unreadable(fakes.FakeDriver):
    """Pins of the guests in ``unreadable`` cannot be read."""

    def __init__(self, cores):
        super().__init__(cores=cores)
        self.unreadable = set()

    def read_pins(self, uuid):
        if uuid in self.unreadable:
            raise enforcer.base.DriverError('emulatorPinInfo failed')
        return super().read_pins(uuid)


@pytest.mark.parametrize('readable_later', [False, True])
def test_a_guest_whose_pins_cannot_be_read_moves_only_onto_free_cpus(
        readable_later):
    # x is adopted while its pins cannot be read: it may be anywhere, so
    # it holds every CPU from the others; in fact it runs on CPUs 1 and 5.
    # The plan gives it core 3, where p is still parked and from where p
    # can only leave once x is out of the new idle pool (core 1). Its
    # first pin must not put it on core 3 beside p.
    driver = _Unreadable(cores=4)
    enf = enforcer.Enforcer(driver, ack_wait=0.0,
                            managed_cpus=frozenset(range(8)))
    _found(driver, enf, {'p': {3, 7}}, {0, 4})
    _enforce_until_done(driver, enf, _host_plan(4, {'p': ()}, {3}))
    driver.unreadable.add('x')
    x = driver.add(fakes.FakeGuest('x', 2, channel=False))
    x.vcpu_pins = x.emulator_pins = frozenset({1, 5})
    enf.track(x.info)
    if readable_later:
        driver.unreadable.clear()
    p = driver.all['p']
    plan = _host_plan(4, {'x': {3}, 'p': ()}, {1})

    def check():
        shared = x.vcpu_pins | p.vcpu_pins <= plan.shared_cpus
        assert shared or not x.vcpu_pins & p.vcpu_pins, (
            x.vcpu_pins, p.vcpu_pins)

    driver.check_isolation = check
    driver.before_pin[:] = [check]
    for _ in range(3):
        outcome = enf.apply(plan)
        check()
    assert outcome.deferred == {} and outcome.failed == {}
    assert x.vcpu_pins == plan.vms['x'].cpus
    assert p.vcpu_pins == plan.shared_cpus
    assert x.emulator_pins == p.emulator_pins == plan.emulator_cpus


def test_large_guest_shrinks_in_bounded_steps():
    big = fakes.FakeGuest('big', 16)
    driver, controller, enf = _setup(big, cores=8)
    enf.max_vcpu_step = 4
    for t in range(3):
        enf.apply(_plan(controller, float(t), {'big': 1500.0}))
        enf.clock.now += 1.0
    driver.calls.clear()
    for t in range(3, 40):
        plan = _plan(controller, float(t), {'big': 0.0})
        enf.apply(plan, {'big': big.online})
        enf.clock.now += 1.0
    steps = [c[2] for c in driver.calls if c[0] == 'target']
    assert steps[-1] == plan.vms['big'].online_vcpus == 1
    assert all(a - b <= 4 for a, b in zip([16] + steps, steps))
    driver.check_isolation()


def test_a_guest_that_lost_its_target_gets_it_again():
    clock_guest = fakes.FakeGuest('a', 8)
    driver, controller, enf = _setup(clock_guest, cores=3)
    plan = _plan(controller, 0.0, {'a': 100.0})
    enf.apply(plan, _online(driver))
    target = plan.vms['a'].online_vcpus
    assert target == 4 and clock_guest.online == target
    assert not enf.check_guest('a', target)
    clock_guest.online = 8                      # the guest was reset
    assert not enf.check_guest('a', 8)          # too soon to judge
    enf.clock.now += 1.0
    assert enf.check_guest('a', 8)
    driver.calls.clear()
    enf.apply(plan, {'a': 8})
    assert ('target', 'a', target) in driver.calls
    assert clock_guest.online == target


def test_drifted_pins_are_written_again():
    a = fakes.FakeGuest('a', 4)
    driver, controller, enf = _setup(a)
    plan = _plan(controller, 0.0, {'a': 100.0})
    enf.apply(plan, _online(driver))
    assert enf.check_drift() == []
    a.vcpu_pins = frozenset(range(16))          # someone ran virsh vcpupin
    assert enf.check_drift() == ['a']
    driver.calls.clear()
    enf.apply(plan, _online(driver))
    assert ('pin_vcpus', 'a', plan.vms['a'].cpus) in driver.calls
    assert enf.check_drift() == []


def _moves_onto(driver, uuid, other):
    """Fail a pin that moves a thread of ``uuid`` onto ``other``'s CPUs.

    Per thread: a narrow of the pinning that takes a thread onto CPUs it
    was not on puts it beside whoever runs there.
    """
    real = driver.pin_vcpus

    def pin(pinned, cpus):
        if pinned == uuid:
            guest = driver.all[uuid]
            threads = guest.vcpu_sets or [guest.vcpu_pins]
            onto = frozenset().union(*[cpus - t for t in threads])
            assert not onto & driver.all[other].vcpu_pins, (
                uuid, threads, cpus, driver.all[other].vcpu_pins)
        return real(pinned, cpus)
    driver.pin_vcpus = pin


def test_threads_found_on_different_sets_narrow_where_all_of_them_ran():
    # A pin call cut short: vCPU 0 of a on {1,5}, the others still on
    # every CPU. The plan gives a core 2 too, where b still runs. The
    # pinning holds the union, but a narrow within it would move vCPU 0
    # onto b's CPUs.
    driver = fakes.FakeDriver(cores=4)
    enf = enforcer.Enforcer(driver, ack_wait=0.0,
                            managed_cpus=frozenset(range(8)))
    _found(driver, enf, {'b': {2, 6}}, {0, 4})
    a = driver.add(fakes.FakeGuest('a', 4, channel=False))
    every = frozenset(range(1, 8))
    a.vcpu_sets = {frozenset({1, 5}), every}
    a.vcpu_pins, a.emulator_pins = every, frozenset({0, 4})
    enf.track(a.info)
    _give_a_b_s_core(driver, enf)


def _give_a_b_s_core(driver, enf):
    """Plan b's core 2 for a: a takes it, no thread of a onto b's CPUs."""
    a = driver.all['a']
    plan = _host_plan(4, {'a': {1, 2}, 'b': {3}}, ())
    _moves_onto(driver, 'a', 'b')
    for _ in range(3):
        outcome = enf.apply(plan)
    assert outcome.deferred == {} and outcome.failed == {}
    assert a.vcpu_pins == plan.vms['a'].cpus
    assert driver.all['b'].vcpu_pins == plan.vms['b'].cpus


def test_drifted_threads_narrow_where_all_of_them_ran():
    # Someone moves vCPU 1 of a onto b's core; then the plan gives a that
    # core. a's first pin waits until b has left it.
    driver = fakes.FakeDriver(cores=4)
    enf = enforcer.Enforcer(driver, ack_wait=0.0,
                            managed_cpus=frozenset(range(8)))
    _found(driver, enf, {'a': {1, 5}, 'b': {2, 3, 6, 7}}, {0, 4})
    _enforce_until_done(driver, enf,
                        _host_plan(4, {'a': {1}, 'b': {2, 3}}, ()))
    # Isolation is someone else's to break now: only the agent's pins
    # are checked (_moves_onto).
    driver.before_pin[:] = []
    driver.check_isolation = lambda: None
    a = driver.all['a']
    a.vcpu_sets = {frozenset({1, 5}), frozenset({2, 6})}
    a.vcpu_pins = frozenset({1, 2, 5, 6})
    assert enf.check_drift() == ['a']
    _give_a_b_s_core(driver, enf)


def test_pin_failure_is_reported_and_retried():
    a = fakes.FakeGuest('a', 4)
    driver, controller, enf = _setup(a)
    driver.fail_pin.add('a')
    plan = _plan(controller, 0.0, {'a': 100.0})
    outcome = enf.apply(plan, _online(driver))
    assert 'vcpu pin' in outcome.failed['a']
    driver.fail_pin.clear()
    outcome = enf.apply(plan, _online(driver))
    assert outcome.failed == {} and a.vcpu_pins == plan.vms['a'].cpus


def _check_ledger(driver, enf, was_clean):
    """The ledger covers reality; what a pool was given is its own."""
    claimed = {}
    for uuid, guest in driver.all.items():
        for kind, actual in (('vcpu', guest.vcpu_pins),
                             ('emulator', guest.emulator_pins)):
            entry = enf.ledger.get((uuid, kind))
            if entry is None or actual is None:
                continue
            assert actual <= entry.cpus, (uuid, kind)
            if entry.pool == 'soak':
                assert uuid in driver.idle, (uuid, entry)
            if entry.pool is not None:
                claimed[(uuid, kind)] = entry
    for key, entry in claimed.items():
        if not entry.pool.startswith('vm:') and entry.pool != 'emulator':
            continue
        for uuid, guest in driver.all.items():
            for kind, actual in (('vcpu', guest.vcpu_pins),
                                 ('emulator', guest.emulator_pins)):
                other = enf.ledger.get((uuid, kind))
                if (uuid, kind) == key or actual is None or \
                        other.pool == entry.pool or \
                        (kind == 'vcpu' and uuid in driver.idle):
                    continue
                assert not actual & entry.cpus, (key, entry, uuid, kind)
    was_clean[0] = True


def _inject(rng, t, driver, guests, utils, every, rate, miss):
    """Tick ``t``'s faults; returns the loads (new every ``every`` ticks).

    From the sixth tick a pin fails before or after its call at
    ``rate``; each guest misses its answers this tick at ``miss``.
    """
    if t % every == 0:
        utils = {u: rng.choice([0.0, 30.0, 150.0, 700.0]) for u in utils}
    rate = 0.0 if t < 5 else rate
    driver.fault = (lambda *a: rng.choice(['before', 'after'])
                    if rng.random() < rate else None)
    for guest in guests:
        guest.acks = rng.random() > miss
    return utils


@pytest.mark.parametrize('seed', range(25))
def test_faults_at_any_step_never_put_a_cpu_in_two_pools(seed):
    rng = random.Random(seed)
    guests = [fakes.FakeGuest(name, rng.choice([2, 4, 8]))
              for name in ('a', 'b', 'c')]
    driver, controller, enf = _setup(*guests, cores=6)
    # Two shared guests may briefly hold different shared sets; the
    # ledger check below knows the pools.
    driver.check_isolation = lambda: None
    was_clean = [False]
    driver.before_pin.append(lambda: _check_ledger(driver, enf, was_clean))
    utils = {g.info.uuid: 100.0 for g in guests}
    for t in range(80):
        utils = _inject(rng, t, driver, guests, utils, every=7, rate=0.3,
                        miss=0.1)
        plan = _plan(controller, float(t), utils)
        enf.apply(plan, {u: g.online for u, g in driver.all.items()})
        _check_ledger(driver, enf, was_clean)
        enf.clock.now += 1.0
    assert was_clean[0]
    # Without faults everything converges to the plan.
    driver.fault = None
    for guest in guests:
        guest.acks = True
    enf.clock.now += 1000.0
    for t in range(80, 84):
        plan = _plan(controller, float(t), utils)
        enf.apply(plan, {u: g.online for u, g in driver.all.items()})
        enf.clock.now += 1.0
    for guest in guests:
        assert guest.vcpu_pins == plan.vms[guest.info.uuid].cpus
        assert guest.emulator_pins == plan.emulator_cpus


def _soak_setup(*guests, cores=6):
    driver = fakes.FakeDriver(cores=cores)
    driver.strict_emulator = True
    config = controller_config.ControllerConfig(be_policy='soak',
                                                classify_samples=1)
    controller = Controller(HostTopology(driver.siblings), config)
    clock = _Clock()
    enf = enforcer.Enforcer(driver, ack_timeout=0.5, ack_wait=0.1,
                            clock=clock, sleep=clock.sleep, be_soak=True)
    for guest in guests:
        driver.add(guest)
        controller.add_vm(VmSpec(guest.info.uuid, guest.info.vcpus,
                                 guest.info.vm_class))
        enf.track(guest.info)
    return driver, controller, enf


def _classed(controller, t, utils, batch_like):
    """A tick whose samples look batch-like (few switches) or not."""
    return controller.tick(float(t), {
        u: VmSample(v, 2.0 * v if u in batch_like else 1000.0 + 50.0 * v)
        for u, v in utils.items()}, 10.0)


def test_a_soaking_guest_is_at_idle_priority_before_its_pins_widen():
    web, batch = fakes.FakeGuest('web', 4), fakes.FakeGuest('batch', 8, 'be')
    driver, controller, enf = _soak_setup(web, batch)
    plan = _plan(controller, 0.0, {'web': 200.0, 'batch': 700.0})
    assert plan.vms['batch'].sched_idle
    # check_isolation runs at every pin: it fails if batch widened over
    # web's pool before its idle priority was set.
    enf.apply(plan, _online(driver))
    assert 'batch' in driver.idle and 'web' not in driver.idle
    calls = [c[:2] for c in driver.calls]
    assert calls.index(('idle', 'batch')) < calls.index(
        ('pin_vcpus', 'batch'))
    assert batch.vcpu_pins == plan.vms['batch'].cpus
    assert batch.vcpu_pins > plan.idle_cpus
    assert web.vcpu_pins == plan.vms['web'].cpus
    assert web.vcpu_pins & batch.vcpu_pins
    driver.calls.clear()
    enf.apply(_plan(controller, 1.0, {'web': 200.0, 'batch': 700.0}),
              _online(driver))
    assert not [c for c in driver.calls if c[0] == 'idle']


def test_idle_priority_ends_only_after_the_pins_left_the_other_pools():
    web = fakes.FakeGuest('web', 4)
    batch = fakes.FakeGuest('batch', 4, 'auto')
    driver, controller, enf = _soak_setup(web, batch)
    for t in range(2):      # a batch-like sample: best-effort
        plan = _classed(controller, t, {'web': 200.0, 'batch': 300.0},
                        {'batch'})
        enf.apply(plan, _online(driver))
    assert plan.vms['batch'].sched_idle and 'batch' in driver.idle
    driver.calls.clear()
    # Reclassified latency-critical: its own pool, then normal priority
    # (set_vcpus_idle(False) checks isolation as it returns).
    plan = _classed(controller, 2, {'web': 200.0, 'batch': 300.0}, set())
    plan = _classed(controller, 3, {'web': 200.0, 'batch': 300.0}, set())
    assert not plan.vms['batch'].sched_idle and plan.vms['batch'].cores
    enf.apply(plan, _online(driver))
    calls = [c[:2] for c in driver.calls]
    assert calls.index(('pin_vcpus', 'batch')) < calls.index(
        ('idle', 'batch'))
    assert 'batch' not in driver.idle
    assert batch.vcpu_pins == plan.vms['batch'].cpus


def test_a_failed_narrow_keeps_idle_priority():
    web = fakes.FakeGuest('web', 4)
    batch = fakes.FakeGuest('batch', 4, 'auto')
    driver, controller, enf = _soak_setup(web, batch)
    for t in range(2):
        plan = _classed(controller, t, {'web': 200.0, 'batch': 300.0},
                        {'batch'})
        enf.apply(plan, _online(driver))
    assert 'batch' in driver.idle
    driver.fail_pin.add('batch')
    for t in range(2, 4):
        plan = _classed(controller, t, {'web': 200.0, 'batch': 300.0},
                        set())
        outcome = enf.apply(plan, _online(driver))
    assert not plan.vms['batch'].sched_idle
    # Still on every CPU: still at idle priority.
    assert 'batch' in driver.idle
    assert 'vcpu pin' in outcome.failed['batch']
    driver.fail_pin.clear()
    enf.apply(_classed(controller, 4, {'web': 200.0, 'batch': 300.0},
                       set()), _online(driver))
    assert 'batch' not in driver.idle


def test_a_guest_whose_priority_cannot_be_set_stays_on_the_shared_cpus():
    web, batch = fakes.FakeGuest('web', 4), fakes.FakeGuest('batch', 8, 'be')
    driver, controller, enf = _soak_setup(web, batch)
    driver.fail_idle.add('batch')
    plan = _plan(controller, 0.0, {'web': 200.0, 'batch': 700.0})
    outcome = enf.apply(plan, _online(driver))
    assert 'cpu.idle' in outcome.failed['batch']
    assert batch.vcpu_pins == plan.shared_cpus
    assert enf.errors['set_vcpus_idle'] == 1
    driver.fail_idle.clear()
    enf.apply(_plan(controller, 1.0, {'web': 200.0, 'batch': 700.0}),
              _online(driver))
    assert 'batch' in driver.idle
    assert batch.vcpu_pins == controller.topology.cpus_of(
        controller.topology.core_ids - controller.emulator_cores)


@pytest.mark.parametrize('seed', range(15))
def test_soak_under_faults_never_puts_a_normal_priority_cpu_in_two_pools(
        seed):
    rng = random.Random(seed)
    guests = [fakes.FakeGuest('a', rng.choice([2, 4])),
              fakes.FakeGuest('b', rng.choice([2, 4, 8])),
              fakes.FakeGuest('c', rng.choice([4, 8]), 'auto')]
    driver, controller, enf = _soak_setup(*guests)
    # As above: the ledger check knows the pools; a vCPU pinning at idle
    # priority is the one thing allowed on another pool's CPUs.
    driver.check_isolation = lambda: None
    was_clean = [False]
    driver.before_pin.append(lambda: _check_ledger(driver, enf, was_clean))
    utils = {g.info.uuid: 100.0 for g in guests}
    batch_like, soaked = {'c'}, set()
    for t in range(60):
        if t % 7 == 0:
            utils = {u: rng.choice([0.0, 30.0, 150.0, 700.0])
                     for u in utils}
        if t % 5 == 2:
            # The third guest turns latency-critical or back.
            batch_like = rng.choice([set(), {'c'}])
        rate = 0.0 if t < 3 else 0.3
        driver.fault = (lambda *a: rng.choice(['before', 'after'])
                        if rng.random() < rate else None)
        driver.fail_idle = {'c'} if rng.random() < rate else set()
        plan = _classed(controller, t, utils, batch_like)
        enf.apply(plan, _online(driver))
        _check_ledger(driver, enf, was_clean)
        soaked |= driver.idle
        enf.clock.now += 1.0
    assert was_clean[0] and soaked
    driver.fault, driver.fail_idle = None, set()
    enf.clock.now += 1000.0
    for t in range(60, 64):
        plan = _classed(controller, t, utils, batch_like)
        enf.apply(plan, _online(driver))
        enf.clock.now += 1.0
    for guest in guests:
        vm = plan.vms[guest.info.uuid]
        assert guest.vcpu_pins == vm.cpus
        assert (guest.info.uuid in driver.idle) == vm.sched_idle


class _FullWalk(enforcer.Enforcer):
    """The pass without its cuts: every guest, every pinning walked."""

    @staticmethod
    def _answered(uuids, waiting):
        return list(uuids)

    def _moving(self, wanted):
        return dict(wanted)


def _run_under_faults(cls, seed):
    """What a pass does over 60 ticks of moving loads, faults and drift."""
    rng = random.Random(seed)
    guests = [fakes.FakeGuest(name, rng.choice([2, 4, 8]))
              for name in ('a', 'b', 'c', 'd')]
    driver, controller, enf = _setup(*guests, cores=6, cls=cls)
    driver.check_isolation = lambda: None
    seen = []
    utils = {g.info.uuid: 100.0 for g in guests}
    for t in range(60):
        utils = _inject(rng, t, driver, guests, utils, every=5, rate=0.2,
                        miss=0.3)
        if t % 9 == 4:
            # Someone re-pins a guest behind the agent's back.
            rng.choice(guests).vcpu_pins = frozenset(range(12))
        drifted = enf.check_drift() if t % 3 == 0 else []
        plan = _plan(controller, float(t), utils)
        outcome = enf.apply(plan, _online(driver))
        seen.append((drifted, outcome, list(driver.calls),
                     {key: enf.ledger.get(key) for key in enf.ledger.keys()},
                     {u: dataclasses.astuple(st)
                      for u, st in enf.acks.items()}))
        driver.calls.clear()
        enf.clock.now += 1.0
    return seen


@pytest.mark.parametrize('seed', range(6))
def test_the_pass_walking_what_moves_does_what_the_full_walk_does(seed):
    # The cut path (pinnings on their target and guests that did not
    # wait skipped) against every guest and pinning walked: the same
    # calls, outcomes, ledger and answers, tick by tick, through pin
    # faults, unanswered targets and pins changed behind the agent.
    cut = _run_under_faults(enforcer.Enforcer, seed)
    full = _run_under_faults(_FullWalk, seed)
    assert [tick[2] for tick in cut] == [tick[2] for tick in full]
    assert cut == full
    # The run exercised what the cut must not hide.
    assert any(tick[0] for tick in cut)                 # drift repaired
    assert any(tick[1].failed for tick in cut)          # failed pins
    assert any(tick[1].fallbacks for tick in cut)       # missed answers


def test_a_pass_over_a_settled_host_walks_no_pinning():
    # Each plan is a new value with equal sets: the pinnings are on
    # their targets, and no narrow, record or widen looks at them.
    guests = [fakes.FakeGuest(name, 4) for name in ('a', 'b', 'c')]
    driver, controller, enf = _setup(*guests)
    utils = {'a': 100.0, 'b': 20.0, 'c': 250.0}
    for t in range(4):
        plan = _plan(controller, float(t), utils)
        enf.apply(plan, _online(driver))
    looked = []
    narrowed = enf._narrowed
    enf._narrowed = lambda entry, cpus: looked.append(cpus) or narrowed(
        entry, cpus)
    copy = dataclasses.replace(
        plan, vms={u: dataclasses.replace(vm, cpus=frozenset(vm.cpus))
                   for u, vm in plan.vms.items()},
        emulator_cpus=frozenset(plan.emulator_cpus),
        shared_cpus=frozenset(plan.shared_cpus))
    driver.calls.clear()
    outcome = enf.apply(copy, _online(driver))
    assert outcome.pinned == 0 and driver.calls == []
    assert looked == []
    # One pinning moved behind the agent's back is walked again.
    guests[0].vcpu_pins = frozenset(range(16))
    assert enf.check_drift() == ['a']
    enf.apply(copy, _online(driver))
    assert ('pin_vcpus', 'a', copy.vms['a'].cpus) in driver.calls
    assert guests[0].vcpu_pins == copy.vms['a'].cpus
