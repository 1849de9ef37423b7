"""A guest whose calls hang keeps its CPUs; the others carry on."""

import dataclasses

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


def _a_holds_cores(driver, **settings):
    """a busy on cores of its own, b less so, c idle, after 12 ticks.

    Returns (agent, tick, the enforcer's outcomes, a's cores' CPUs).
    """
    a = driver.add(fakes.FakeGuest('a', 4, channel=False))
    b = driver.add(fakes.FakeGuest('b', 8, channel=False))
    driver.add(fakes.FakeGuest('c', 2, channel=False))
    a.util, b.util = 390.0, 150.0
    driver.all['c'].util = 0.0
    agent, tick = fakes.ticking_agent(driver)
    agent.settings = dataclasses.replace(agent.settings, **settings)
    outcomes = fakes.record_outcomes(agent)
    agent.start()
    for _ in range(12):
        plan = tick()
    held = plan.vms['a'].cpus
    assert plan.vms['a'].cores and a.vcpu_pins == held
    return agent, tick, outcomes, held


def test_a_hung_guest_keeps_its_cores_and_delays_no_other_guest():
    # a holds cores while its QEMU hangs and it is paused: its threads
    # stay where they are, so its cores go to nobody until its calls
    # return, and b, busy, is enforced on every tick meanwhile.
    driver = fakes.FakeDriver(cores=5)
    agent, tick, outcomes, held = _a_holds_cores(driver)
    a, b = driver.all['a'], driver.all['b']
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
    # The operator sees which cores wait for which guest.
    held_cores = sorted(agent._cores_of(held))
    assert {'owner': 'a', 'reason': 'calls hang',
            'cores': held_cores} in agent.snapshot['held']
    # Its calls return: it is parked and its cores are free again.
    driver.hung.clear()
    for _ in range(3):
        plan = tick()
    assert a.vcpu_pins == plan.shared_cpus
    assert not outcomes[-1].deferred
    assert agent.snapshot['held'] == []


class _StallingDriver(fakes.FakeDriver):
    """The next call on a guest in ``stall`` times out: its calls hang.

    ``stall_on`` says which call meets it first: ``read_pins`` (the
    drift check) or ``pin`` (the enforcer).
    """

    def __init__(self, *args, stall_on='pin', **kwargs):
        super().__init__(*args, **kwargs)
        self.stall = set()
        self.stall_on = stall_on

    def _meet(self, uuid, call):
        if uuid in self.stall and call == self.stall_on:
            self.stall.discard(uuid)
            self.hung.add(uuid)
            raise base.DriverError('%s of %s timed out' % (call, uuid))

    def read_pins(self, uuid):
        self._meet(uuid, 'read_pins')
        return super().read_pins(uuid)

    def _pin(self, uuid, kind, cpus):
        self._meet(uuid, 'pin')
        return super()._pin(uuid, kind, cpus)


def _hang_as_b_grows(stall_on):
    """a holds cores; b is growing as a is paused and its QEMU hangs.

    Returns (driver, agent, tick, outcomes, a's cores' CPUs).
    """
    driver = _StallingDriver(cores=5, stall_on=stall_on)
    # Every guest's pins read on every tick.
    agent, tick, outcomes, held = _a_holds_cores(driver,
                                                 drift_check_interval=1.0)
    driver.all['b'].util = 800.0
    tick()
    driver.stall.add('a')
    driver.pending_events.append(('a', base.GuestEvent.PAUSED))
    return driver, agent, tick, outcomes, held


def _b_enforced_apart(driver, tick, outcomes, held):
    """For three ticks b waits for nobody and a keeps ``held``."""
    b = driver.all['b']
    for t in range(3):
        plan = tick()
        assert 'b' not in outcomes[-1].deferred, (t, outcomes[-1])
        assert not plan.vms['b'].cpus & held, t
        assert b.vcpu_pins == plan.vms['b'].cpus, t
        assert driver.all['a'].vcpu_pins == held


def test_a_guest_the_drift_check_finds_hung_keeps_its_cores_at_once():
    # a's QEMU hangs, unnoticed until the drift check reads its pins
    # (observing a guest makes no call that waits for QEMU), on the tick
    # a is paused and b could grow into its cores: that tick's plan
    # keeps them a's already, so b's enforcement waits for nobody.
    driver, agent, tick, outcomes, held = _hang_as_b_grows('read_pins')
    _b_enforced_apart(driver, tick, outcomes, held)


def test_a_guest_whose_pin_hangs_keeps_its_cores_from_the_next_tick():
    # a's QEMU hangs and the first call to meet it is its pin, on the
    # tick whose plan gave its cores to b: b waits that tick. From the
    # next tick on the plan keeps a's cores a's, though it had given
    # them away, and b is enforced on what it has.
    driver, agent, tick, outcomes, held = _hang_as_b_grows('pin')
    tick()
    assert 'a' in driver.hung
    _b_enforced_apart(driver, tick, outcomes, held)


def test_a_parked_guest_whose_pin_hangs_keeps_its_idle_cores_idle():
    # c is parked on the idle pool when the plan gives one of its cores
    # to the emulator pool, and c's pin off that core hangs. Its vCPUs
    # stay on every idle core it had: from the next tick on, the plan
    # keeps them all idle, so the other guests' pins wait for nobody
    # (enforced within a tick, well inside the call deadline).
    driver = _StallingDriver(cores=8, stall_on='pin')
    a = driver.add(fakes.FakeGuest('a', 4, channel=False))
    b = driver.add(fakes.FakeGuest('b', 8, channel=False))
    c = driver.add(fakes.FakeGuest('c', 2, channel=False))
    a.util, b.util, c.util = 390.0, 100.0, 0.0
    agent, tick = fakes.ticking_agent(driver)
    outcomes = fakes.record_outcomes(agent)
    agent.start()
    for _ in range(15):
        plan = tick()
    assert plan.vms['c'].mode.value == 'idle'
    parked = c.vcpu_pins
    assert parked == plan.idle_cpus
    b.util = 800.0
    driver.stall.add('c')
    plan = tick()
    assert 'c' in driver.hung and plan.emulator_cpus & parked
    for t in range(8):
        plan = tick()
        assert not outcomes[-1].deferred, (t, outcomes[-1].deferred)
        assert c.vcpu_pins == parked and parked <= plan.idle_cpus, t
        for guest in (a, b):
            uuid = guest.info.uuid
            assert not plan.vms[uuid].cpus & parked, (t, uuid)
            assert guest.vcpu_pins == plan.vms[uuid].cpus, (t, uuid)
            assert guest.emulator_pins == plan.emulator_cpus, (t, uuid)
        _pools_apart(driver, plan)
    # Its calls return: it follows the idle pool, which may shrink again.
    driver.hung.clear()
    for _ in range(8):
        plan = tick()
    assert c.vcpu_pins == plan.shared_cpus
    assert not outcomes[-1].deferred
