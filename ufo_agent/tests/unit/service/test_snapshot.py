"""The snapshot the endpoint serves: a copy the loop cannot change."""

import dataclasses

from ufo_agent.controller import ControllerConfig
from ufo_agent.service import loop
from ufo_agent.service import snapshot
from ufo_agent.tests.unit.service import fakes


def _ticked_agent():
    driver = fakes.FakeDriver()
    driver.add(fakes.FakeGuest('a', 8))
    driver.add(fakes.FakeGuest('b', 4, channel=False))
    agent = loop.Agent(driver, frozenset(c for g in driver.siblings
                                         for c in g), ControllerConfig())
    agent.start()
    for _ in range(3):
        driver.clock += 1.0
        agent.tick()
    return agent


def test_each_guest_is_its_status_as_asdict_gives_it():
    agent = _ticked_agent()
    vms = agent.snapshot['vms']
    assert [vm['uuid'] for vm in vms] == ['a', 'b']
    for vm in vms:
        assert vm == dataclasses.asdict(agent.status[vm['uuid']])
    assert vms[0]['cores'] > 0 and vms[0]['cpus']


def test_later_changes_of_a_status_do_not_reach_the_snapshot():
    @dataclasses.dataclass
    class Status:
        uuid: str
        cores: int
        history: list

    status = Status('a', 2, [1, 2])
    agent = _ticked_agent()
    agent.status = {'a': status}
    built = snapshot.build(agent, 0.0)
    status.cores = 3
    status.history.append(3)
    assert built['vms'] == [{'uuid': 'a', 'cores': 2, 'history': [1, 2]}]
