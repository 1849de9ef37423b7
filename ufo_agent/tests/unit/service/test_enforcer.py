"""The enforcer's ordering, idempotence and rollback."""

from ufo_agent.controller import Controller
from ufo_agent.controller import HostTopology
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


def _setup(*guests, cores=8):
    driver = fakes.FakeDriver(cores=cores)
    driver.strict_emulator = True
    controller = Controller(HostTopology(driver.siblings))
    clock = _Clock()
    enf = enforcer.Enforcer(driver, ack_timeout=0.5, clock=clock,
                            sleep=clock.sleep)
    for guest in guests:
        driver.add(guest)
        controller.add_vm(VmSpec(guest.info.uuid, guest.info.vcpus, 'lc'))
        enf.track(guest.info)
    return driver, controller, enf


def _plan(controller, t, utils):
    return controller.tick(t, {u: VmSample(v, 1000.0)
                               for u, v in utils.items()}, 10.0)


def test_shrink_tells_the_guest_first_and_grow_tells_it_last():
    a = fakes.FakeGuest('a', 8)
    driver, controller, enf = _setup(a)
    enf.apply(_plan(controller, 0.0, {'a': 100.0}))
    assert a.vcpu_pins == controller.topology.cpus_of(
        controller.vms['a'].cores)
    driver.calls.clear()
    # Force a shrink: 4 cores -> the controller's probe to 3.
    plan = _plan(controller, 3.0, {'a': 100.0})
    assert len(plan.vms['a'].cores) == 3
    enf.apply(plan, {'a': 8})
    kinds = [c[0] for c in driver.calls]
    assert kinds.index('target') < kinds.index('pin_vcpus')
    assert ('target', 'a', 6) in driver.calls
    driver.calls.clear()
    # Saturated: grow back; pins widen before the guest onlines.
    plan = _plan(controller, 6.0, {'a': 560.0})
    assert len(plan.vms['a'].cores) == 4
    enf.apply(plan, {'a': 6})
    kinds = [c[0] for c in driver.calls]
    assert kinds.index('pin_vcpus') < kinds.index('target')


def test_nothing_is_rewritten_when_nothing_changed():
    a, b = fakes.FakeGuest('a', 4), fakes.FakeGuest('b', 4)
    driver, controller, enf = _setup(a, b)
    plan = _plan(controller, 0.0, {'a': 100.0, 'b': 100.0})
    first = enf.apply(plan)
    assert first.pinned == 4 and first.targets == 2
    driver.calls.clear()
    again = enf.apply(plan)
    assert (again.pinned, again.targets, driver.calls) == (0, 0, [])
    enf.invalidate('a')
    enf.apply(plan)
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


def test_unacknowledged_shrink_is_rolled_back_to_all_vcpus():
    stuck = fakes.FakeGuest('a', 8, acks=False)
    driver, controller, enf = _setup(stuck)
    enf.apply(_plan(controller, 0.0, {'a': 100.0}))
    plan = _plan(controller, 3.0, {'a': 100.0})
    driver.calls.clear()
    outcome = enf.apply(plan, {'a': 8})
    assert 'no acknowledgement' in outcome.failed['a']
    targets = [c for c in driver.calls if c[0] == 'target']
    assert targets == [('target', 'a', 6), ('target', 'a', 8)]
    # Pins still narrowed: isolation of the others comes first.
    assert stuck.vcpu_pins == plan.vms['a'].cpus
    assert enf.pending() == {}


def test_a_guest_that_lost_its_target_gets_it_again():
    clock_guest = fakes.FakeGuest('a', 8)
    driver, controller, enf = _setup(clock_guest, cores=3)
    plan = _plan(controller, 0.0, {'a': 100.0})
    enf.apply(plan)
    target = plan.vms['a'].online_vcpus
    assert target == 4
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
    enf.apply(plan)
    assert enf.check_drift() == []
    a.vcpu_pins = frozenset(range(16))          # someone ran virsh vcpupin
    assert enf.check_drift() == ['a']
    driver.calls.clear()
    enf.apply(plan)
    assert ('pin_vcpus', 'a', plan.vms['a'].cpus) in driver.calls
    assert enf.check_drift() == []


def test_pin_failure_is_reported_and_retried():
    a = fakes.FakeGuest('a', 4)
    driver, controller, enf = _setup(a)
    driver.fail_pin.add('a')
    plan = _plan(controller, 0.0, {'a': 100.0})
    outcome = enf.apply(plan)
    assert 'vcpu pin' in outcome.failed['a']
    driver.fail_pin.clear()
    outcome = enf.apply(plan)
    assert outcome.failed == {} and a.vcpu_pins == plan.vms['a'].cpus
