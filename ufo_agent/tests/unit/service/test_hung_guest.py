"""A guest whose calls hang keeps its CPUs; the others carry on."""

from ufo_agent.driver import base
from ufo_agent.tests.unit.service import fakes


def _pools_apart(driver, plan):
    """No CPU in two pools, on the guests' actual pins.

    Guests whose pins are inside the shared CPUs are parked together.
    """
    pins = {u: g.vcpu_pins for u, g in driver.all.items()}
    emulator = frozenset().union(*[g.emulator_pins
                                   for g in driver.all.values()])
    for uuid, cpus in pins.items():
        if not cpus <= plan.shared_cpus:
            assert not cpus & emulator, (uuid, pins, emulator)
        for other, other_cpus in pins.items():
            if other != uuid and cpus & other_cpus:
                assert cpus | other_cpus <= plan.shared_cpus, pins


def test_a_hung_guest_keeps_its_cores_and_delays_no_other_guest():
    # a holds cores while its QEMU hangs and it is paused: its threads
    # stay where they are, so its cores go to nobody until its calls
    # return, and b, busy, is enforced on every tick meanwhile.
    driver = fakes.FakeDriver(cores=5)
    a = driver.add(fakes.FakeGuest('a', 4, channel=False))
    b = driver.add(fakes.FakeGuest('b', 8, channel=False))
    driver.add(fakes.FakeGuest('c', 2, channel=False))
    a.util, b.util = 390.0, 150.0
    driver.all['c'].util = 0.0
    agent, tick = fakes.ticking_agent(driver)
    outcomes = []
    apply = agent.enforcer.apply
    agent.enforcer.apply = lambda *args: outcomes.append(apply(*args)) \
        or outcomes[-1]
    agent.start()
    for _ in range(12):
        plan = tick()
    held = plan.vms['a'].cpus
    assert plan.vms['a'].cores and a.vcpu_pins == held
    driver.hung.add('a')
    driver.pending_events.append(('a', base.GuestEvent.PAUSED))
    b.util = 800.0
    for t in range(15):
        plan = tick()
        outcome = outcomes[-1]
        assert set(outcome.deferred) <= {'a'}, (t, outcome.deferred)
        assert not plan.vms['b'].cpus & held
        assert b.vcpu_pins == plan.vms['b'].cpus, t
        assert a.vcpu_pins == held
        _pools_apart(driver, plan)
    assert 'earlier call has not returned' in agent.status['a'].reason
    # Its calls return: it is parked and its cores are free again.
    driver.hung.clear()
    for _ in range(3):
        plan = tick()
    assert a.vcpu_pins == plan.shared_cpus
    assert not outcomes[-1].deferred
