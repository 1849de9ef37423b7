"""A tick survives its own errors; one guest's bug costs only that guest."""

import logging

from ufo_agent.service import metrics
from ufo_agent.tests.unit.service import fakes


class _BuggyDriver(fakes.FakeDriver):
    """Every call on the guests in ``buggy`` raises a RuntimeError."""

    def __init__(self):
        super().__init__()
        self.buggy = set()

    def _get(self, uuid):
        if uuid in self.buggy:
            raise RuntimeError('bug in the driver for %s' % uuid)
        return super()._get(uuid)


def test_a_guest_whose_driver_calls_raise_costs_only_that_guest(caplog):
    driver = _BuggyDriver()
    a = driver.add(fakes.FakeGuest('a', 4))
    driver.add(fakes.FakeGuest('bad', 4))
    c = driver.add(fakes.FakeGuest('c', 4))
    agent, tick = fakes.ticking_agent(driver)
    agent.start()
    for _ in range(3):
        tick()
    driver.buggy.add('bad')
    a.util, c.util = 350.0, 20.0             # the others' plans change
    with caplog.at_level(logging.DEBUG):
        for _ in range(8):
            plan = tick()
    assert agent.ticks == 11
    assert plan is agent.last_plan
    # Every other guest keeps being enforced.
    for guest in (a, c):
        assert guest.vcpu_pins == plan.vms[guest.info.uuid].cpus
    assert agent.tick_errors >= 8
    assert 'bug in the driver for bad' in agent.status['bad'].reason
    # The traceback is logged once per kind of error, not every tick.
    tracebacks = [r for r in caplog.records if r.exc_info and
                  'observe of guest bad' in r.getMessage()]
    assert len(tracebacks) == 1
    assert agent.snapshot['tick_errors'] == agent.tick_errors
    assert 'ufo_tick_errors_total %s' % float(agent.tick_errors) in \
        metrics.render(agent.snapshot)
    # Fixed: the guest is enforced again.
    driver.buggy.clear()
    for _ in range(3):
        plan = tick()
    bad = driver.all['bad']
    assert bad.vcpu_pins == plan.vms['bad'].cpus


def test_an_exception_abandons_the_tick_and_the_next_one_runs(caplog):
    driver = fakes.FakeDriver()
    a = driver.add(fakes.FakeGuest('a', 4))
    agent, tick = fakes.ticking_agent(driver)
    agent.start()
    good = tick()
    progress = agent.last_progress
    real = agent.controller.tick
    agent.controller.tick = lambda *args: 1 / 0
    with caplog.at_level(logging.ERROR):
        assert tick() is good
    assert agent.tick_errors == 1 and agent.ticks == 2
    assert agent.last_progress == progress       # not a completed tick
    assert 'Tick 2 failed and was abandoned' in caplog.text
    assert 'ZeroDivisionError' in caplog.text    # with its traceback
    assert agent.snapshot['tick_errors'] == 1
    agent.controller.tick = real
    plan = tick()
    assert agent.ticks == 3 and agent.last_progress > progress
    assert a.vcpu_pins == plan.vms['a'].cpus


def test_a_guest_that_cannot_be_adopted_does_not_stop_the_others():
    driver = fakes.FakeDriver()
    driver.add(fakes.FakeGuest('a', 4))
    driver.add(fakes.FakeGuest('bad', 0))       # no controller takes it
    agent, tick = fakes.ticking_agent(driver)
    agent.start()
    assert set(agent.guests) == {'a'} and agent.tick_errors == 1
    plan = tick()
    assert set(plan.vms) == {'a'}
    assert driver.all['a'].vcpu_pins == plan.vms['a'].cpus
