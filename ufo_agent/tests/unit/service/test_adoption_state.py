"""A guest is adopted whatever its learned-state file holds.

Learned state only saves relearning: a file that is not strict JSON,
nests too deep, holds numbers no float can hold, or that the controller
cannot use is discarded with a warning naming it, and the guest is
managed from its first tick, as a new one.
"""

import logging

import pytest

from ufo_agent import state
from ufo_agent.tests.unit.service import fakes

LEARNED = ('{"vcpus": 4, "threads_per_core": 2, "flat_sf": false, '
           '"model": {"samples": {"1": [[%s, 1000.0, 1.0]]}, '
           '"models": {}}}')


def _file(tmp_path, learned):
    path = tmp_path / 'a.json'
    path.write_text('{"version": 1, "uuid": "a", "learned": %s}' % learned)
    return path


@pytest.mark.parametrize('learned, named', [
    (LEARNED % 'Infinity', True),
    (LEARNED % 'NaN', True),
    ('[' * 50000 + ']' * 50000, True),      # deeper than the parser goes
    # Valid JSON the controller drops as it drops another flavor's.
    (LEARNED % ('1' + '0' * 400), False),   # no float holds it
], ids=['infinity', 'nan', 'deep', 'huge-int'])
def test_a_guest_with_an_unusable_state_file_is_adopted_and_pinned(
        tmp_path, caplog, learned, named):
    path = _file(tmp_path, learned)
    driver = fakes.FakeDriver()
    guest = driver.add(fakes.FakeGuest('a', 4))
    agent, tick = fakes.ticking_agent(
        driver, store=state.StateStore(str(tmp_path)))
    with caplog.at_level(logging.WARNING):
        agent.start()
    assert set(agent.guests) == {'a'}
    assert 'a' in agent.controller.vms
    assert not agent.controller.vms['a'].model.samples
    for _ in range(3):
        plan = tick()
    assert guest.vcpu_pins == plan.vms['a'].cpus
    assert agent.tick_errors == 0
    assert (str(path) in caplog.text) is named


def test_state_the_controller_cannot_import_is_discarded(
        tmp_path, caplog, monkeypatch):
    path = _file(tmp_path, LEARNED % '50.0')
    driver = fakes.FakeDriver()
    driver.add(fakes.FakeGuest('a', 4))
    agent, tick = fakes.ticking_agent(
        driver, store=state.StateStore(str(tmp_path)))
    real_add = agent.controller.add_vm

    def add_vm(spec, learned=None, now=0.0):
        if learned is not None:
            raise RecursionError('maximum recursion depth exceeded')
        return real_add(spec, learned, now)

    monkeypatch.setattr(agent.controller, 'add_vm', add_vm)
    with caplog.at_level(logging.WARNING):
        agent.start()
    assert set(agent.guests) == {'a'} and 'a' in agent.controller.vms
    assert agent.tick_errors == 0
    [record] = [r for r in caplog.records if str(path) in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert 'RecursionError' in record.getMessage()
