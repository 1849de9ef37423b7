"""A paused guest: parked, its pins moved before its cores change owner."""

from ufo_agent.controller import Controller
from ufo_agent.controller import controller as ctl
from ufo_agent.controller import ControllerConfig
from ufo_agent.controller import HostTopology
from ufo_agent.controller import plan as plan_mod
from ufo_agent.controller import VmSample
from ufo_agent.controller import VmSpec
from ufo_agent.driver import base
from ufo_agent.service import acks as acks_mod
from ufo_agent.service import enforcer
from ufo_agent.service import ledger as ledger_mod
from ufo_agent.tests.unit.service import fakes
from ufo_agent.tests.unit.service.test_loop import _agent


def _given_away(driver, agent, uuid):
    """CPUs a guest's live pins reach that another guest's pool holds."""
    pins = driver.all[uuid].vcpu_pins or frozenset()
    ledger = agent.enforcer.ledger
    out = set()
    for other in driver.all:
        entry = ledger.get((other, 'vcpu'))
        if other != uuid and entry is not None and \
                entry.pool == ledger_mod.vm_pool(other):
            out |= pins & entry.cpus
    return out


def _busy_pair():
    driver = fakes.FakeDriver(cores=6, threads=1)
    busy = driver.add(fakes.FakeGuest('b', 4))
    paused = driver.add(fakes.FakeGuest('p', 4))
    busy.util = paused.util = 390.0
    agent, tick = _agent(driver)
    agent.start()
    # Until both hold cores and the busy guest is short of what it wants
    # (the pool sizes move with the emulator load for a few ticks).
    for i in range(30):
        plan = tick()
        b = plan.vms['b']
        if i >= 7 and plan.vms['p'].cores and b.cores and \
                b.wanted_cores > len(b.cores):
            break
    assert plan.vms['p'].cores and b.cores
    assert b.wanted_cores > len(b.cores)
    return driver, agent, tick, busy, paused


def test_pause_parks_the_guest_and_its_cores_go_only_after_its_pins():
    driver, agent, tick, busy, paused = _busy_pair()
    busy_before = agent.controller.last_plan.vms['b'].cores
    problems = []

    def check():
        # Between any two pin calls: the ledger never gives the paused
        # guest's CPUs to another pool while its pins still reach them.
        shared = _given_away(driver, agent, 'p')
        if shared:
            problems.append(sorted(shared))
    driver.before_pin.append(check)
    driver.pending_events.append(('p', base.GuestEvent.PAUSED))
    driver.calls.clear()
    plan = tick()
    check()
    assert problems == []
    assert plan.vms['p'].mode == plan_mod.VmMode.IDLE
    assert paused.vcpu_pins == plan.shared_cpus
    # The busy guest, short of cores, grew in the same tick.
    assert len(plan.vms['b'].cores) > len(busy_before)
    assert busy.vcpu_pins == plan.vms['b'].cpus
    assert agent.status['p'].paused and 'p' in agent.guests
    # Paused: no target, no observation.
    assert not [c for c in driver.calls if c[:2] == ('target', 'p')]
    count = paused.count
    for _ in range(5):
        plan = tick()
        check()
    assert paused.count == count
    assert problems == []


def test_resume_wakes_the_guest_like_a_parked_one():
    driver, agent, tick, busy, paused = _busy_pair()
    driver.pending_events.append(('p', base.GuestEvent.PAUSED))
    for _ in range(3):
        plan = tick()
    assert paused.vcpu_pins == plan.shared_cpus
    driver.pending_events.append(('p', base.GuestEvent.RESUMED))
    plan = tick()
    assert not agent.status['p'].paused
    for _ in range(6):
        plan = tick()
    assert plan.vms['p'].mode == plan_mod.VmMode.ACTIVE
    assert plan.vms['p'].cores
    assert paused.vcpu_pins == plan.vms['p'].cpus
    driver.check_isolation()


def test_a_new_qemu_of_a_paused_guest_is_not_paused():
    driver, agent, tick, busy, paused = _busy_pair()
    driver.pending_events.append(('p', base.GuestEvent.PAUSED))
    tick()
    # Destroyed and started again (or started over by the driver's poll).
    driver.pending_events.append(('p', base.GuestEvent.STARTED))
    tick()
    assert not agent.status['p'].paused and 'p' not in agent.paused


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_enforcer_gives_up_an_unanswered_target_of_a_paused_guest():
    driver = fakes.FakeDriver(cores=8)
    guest = driver.add(fakes.FakeGuest('a', 8))
    controller = Controller(HostTopology(driver.siblings),
                            ControllerConfig())
    controller.add_vm(VmSpec('a', 8, 'lc'))
    clock = _Clock()
    enf = enforcer.Enforcer(driver, ack_timeout=0.5, ack_wait=0.1,
                            clock=clock, sleep=clock.sleep)
    enf.track(guest.info)
    plan = controller.tick(0.0, {'a': VmSample(100.0, 1000.0)}, 5.0)
    enf.apply(plan, {'a': 8})
    assert enf.acks['a'].state == acks_mod.AckState.PROVEN
    # A shrink is out, and the guest pauses before it answers.
    guest.acks = False
    controller.park('a', 1.0)
    enf.apply(controller.tick(1.0, {}, 5.0), {'a': 8})
    assert enf.acks['a'].waiting
    enf.pause('a')
    st = enf.acks['a']
    assert not st.waiting and st.assumed_online() == 8
    driver.calls.clear()
    for t in range(2, 8):
        clock.now = float(t)
        plan = controller.tick(float(t), {}, 5.0)
        out = enf.apply(plan, {})
        assert out.fallbacks == ()
    # Not a miss; no target while paused; pins on the shared CPUs.
    assert st.state == acks_mod.AckState.PROVEN and st.misses == 0
    assert not [c for c in driver.calls if c[0] == 'target']
    assert guest.vcpu_pins == plan.shared_cpus
    # Resumed: targets again (it is parked: one vCPU online).
    guest.acks = True
    enf.resume('a')
    enf.apply(plan, {'a': 8})
    assert ('target', 'a', 1) in driver.calls


def test_controller_park_frees_the_cores_and_logs_why():
    controller = Controller(HostTopology.uniform(6, 1))
    controller.add_vm(VmSpec('a', 4, 'lc'))
    plan = controller.tick(0.0, {'a': VmSample(390.0, 1000.0)}, 5.0)
    held = len(plan.vms['a'].cores)
    assert held
    controller.park('a', 0.5)
    plan = controller.tick(1.0, {}, 5.0)
    vm = plan.vms['a']
    assert vm.mode == plan_mod.VmMode.IDLE and not vm.cores
    assert vm.cpus == plan.shared_cpus and vm.online_vcpus == 1
    assert [(d.action, d.old, d.reason.rule) for d in plan.decisions] == [
        (plan_mod.Action.PARK, held, ctl.PAUSED)]
    # Busy again after the resume: it wakes with the cores it had.
    for t in range(2, 4):
        plan = controller.tick(float(t), {'a': VmSample(390.0, 1000.0)},
                               5.0)
    assert plan.vms['a'].mode == plan_mod.VmMode.ACTIVE
    assert len(plan.vms['a'].cores) == held


def test_status_shows_a_paused_guest():
    from ufo_agent.cmd import status
    driver, agent, tick, busy, paused = _busy_pair()
    driver.pending_events.append(('p', base.GuestEvent.PAUSED))
    tick()
    vms = {vm['uuid']: vm for vm in agent.snapshot['vms']}
    assert vms['p']['paused'] and not vms['b']['paused']
    assert 'idle (paused)' in status.format_status(agent.snapshot)
