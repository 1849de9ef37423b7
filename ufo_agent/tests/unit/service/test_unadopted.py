"""A running domain the agent could not adopt keeps the CPUs it is on.

After a restart, a guest whose definition cannot be read yet may sit in
a pool the agent before gave it: until it is adopted, no pool of this
agent may take the CPUs its threads may run on.
"""

from ufo_agent.service import metrics
from ufo_agent import state
from ufo_agent.tests.unit.service import fakes
from ufo_agent.tests.unit.service import test_metrics

# Cores 0 and 1 of the fake host.
CORE_0 = frozenset({0, 4})
CORE_1 = frozenset({1, 5})


def _host(unadopted):
    """A busy guest an earlier agent left on core 0, and domain x."""
    driver = fakes.FakeDriver(cores=4)
    busy = driver.add(fakes.FakeGuest('a', 8, channel=False))
    busy.util = 800.0
    busy.vcpu_pins = busy.emulator_pins = CORE_0
    driver.unadopted['x'] = unadopted
    return driver, busy


def _reach(guest):
    return frozenset().union(*(guest.vcpu_sets or [guest.vcpu_pins or ()]))


def test_a_busy_guest_grows_around_a_guest_not_adopted():
    driver, busy = _host((frozenset([CORE_1]), CORE_1))
    agent, tick = fakes.ticking_agent(driver)
    agent.start()
    for _ in range(10):
        plan = tick()
        assert not _reach(busy) & CORE_1
        assert not busy.emulator_pins & CORE_1
    # The plan left its core out of every pool, and nobody waits for it.
    assert len(_reach(busy)) >= 4
    assert not (plan.vms['a'].cpus | plan.emulator_cpus) & CORE_1
    assert agent._deferred == {}
    # Gone (or adopted as a guest of its own): its CPUs are free.
    del driver.unadopted['x']
    for _ in range(10):
        tick()
    assert _reach(busy) & CORE_1


def test_threads_over_every_managed_cpu_hold_none():
    every = frozenset(range(8))
    driver, busy = _host((frozenset([every]), every))
    agent, tick = fakes.ticking_agent(driver)
    agent.start()
    for _ in range(10):
        tick()
    assert _reach(busy) & CORE_1


def test_pins_that_cannot_be_read_hold_every_cpu():
    driver, busy = _host(None)
    agent, tick = fakes.ticking_agent(driver)
    agent.start()
    for _ in range(5):
        tick()
        # It may narrow where it runs, never widen.
        assert _reach(busy) <= CORE_0
    entry = agent.enforcer.ledger.get(('x', 'vcpu'))
    assert entry.guessed and entry.cpus == frozenset(range(8))


def test_the_cpus_an_earlier_agents_calls_may_land_on_are_held(tmp_path):
    store = state.StateStore(str(tmp_path))
    store.in_flight_record().save({'x': {'vcpu': CORE_1}})
    every = frozenset(range(8))
    driver, busy = _host((frozenset([every]), every))
    agent, tick = fakes.ticking_agent(driver, store=store)
    agent.start()
    for _ in range(10):
        tick()
        assert not _reach(busy) & CORE_1


def test_a_guest_whose_adoption_fails_in_the_agent_keeps_its_cpus():
    driver, busy = _host(None)
    del driver.unadopted['x']
    held = driver.add(fakes.FakeGuest('x', 2, channel=False))
    held.vcpu_pins = held.emulator_pins = CORE_1
    agent, tick = fakes.ticking_agent(driver)
    add_vm = agent.controller.add_vm

    def refuse_x(spec, *args):
        if spec.uuid == 'x':
            raise ValueError('injected')
        return add_vm(spec, *args)
    agent.controller.add_vm = refuse_x
    agent.start()
    for _ in range(10):
        tick()
        assert 'x' not in agent.guests
        assert not _reach(busy) & CORE_1
    assert len(_reach(busy)) >= 4


def test_the_status_and_metrics_name_the_guest_and_its_held_cores():
    driver, busy = _host((frozenset([CORE_1]), CORE_1))
    agent, tick = fakes.ticking_agent(driver)
    agent.start()
    for _ in range(3):
        tick()
    held = [row for row in agent.snapshot['held'] if row['owner'] == 'x']
    assert held == [{'owner': 'x', 'reason': 'not adopted', 'cores': [1]}]
    families = test_metrics._families(
        metrics.render(agent.snapshot))
    assert test_metrics._value(families, 'ufo_held_cores',
                               reason='not adopted') == 1
    assert test_metrics._value(families, 'ufo_held_guests',
                               reason='not adopted') == 1
    assert test_metrics._value(families, 'ufo_held_guests',
                               reason='calls hang') == 0
    # Adopted or gone: nothing held, and the status says so.
    del driver.unadopted['x']
    tick()
    assert agent.snapshot['held'] == []
