"""A guest that arrives with pins of another host (a live migration)."""

import pytest

from ufo_agent.controller import ControllerConfig
from ufo_agent.service import ledger as ledger_mod
from ufo_agent.service import loop
from ufo_agent.service import settings as settings_mod
from ufo_agent.tests.unit.service import fakes


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.mark.parametrize('vcpu,emulator', [
    ({0}, {1}),         # the source's plan, swapped here
    ({0, 1}, {1}),
    ({1}, {0}),         # already where it goes
])
def test_found_pins_that_must_swap_converge_in_one_tick(vcpu, emulator):
    driver = fakes.FakeDriver(cores=2, threads=1)
    guest = driver.add(fakes.FakeGuest('g', 2))
    guest.vcpu_pins, guest.emulator_pins = frozenset(vcpu), \
        frozenset(emulator)
    clock = _Clock()
    agent = loop.Agent(driver, frozenset([0, 1]), ControllerConfig(),
                       settings_mod.AgentSettings(), clock=clock)
    agent.start()
    clock.now += 1.0
    plan = agent.tick()
    # Here the emulator pool is core 0 and the guest gets core 1.
    assert plan.vms['g'].cpus == {1} and plan.emulator_cpus == {0}
    assert guest.vcpu_pins == {1} and guest.emulator_pins == {0}
    ledger = agent.enforcer.ledger
    assert ledger.get(('g', 'vcpu')).pool == ledger_mod.vm_pool('g')
    assert ledger.get(('g', 'emulator')).pool == ledger_mod.EMULATOR


def test_another_guests_found_pins_still_block():
    ledger = ledger_mod.Ledger()
    ledger.adopt(('a', 'emulator'), {1}, exact=True)
    ledger.adopt(('b', 'emulator'), {1}, exact=True)
    # a's vCPUs may join their pool over a's own found emulator pins...
    assert ledger.holders({1}, ledger_mod.vm_pool('a'), ('a', 'vcpu')) == [
        ('b', 'emulator')]
    # ... never over another guest's, nor into another pool.
    assert ledger.holders({1}, ledger_mod.EMULATOR, ('a', 'vcpu')) == [
        ('a', 'emulator'), ('b', 'emulator')]
    ledger.succeeded(('a', 'emulator'), ledger_mod.EMULATOR, {1})
    assert ledger.holders({1}, ledger_mod.vm_pool('a'), ('a', 'vcpu')) == [
        ('a', 'emulator'), ('b', 'emulator')]
