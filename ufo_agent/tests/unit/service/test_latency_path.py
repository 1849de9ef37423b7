"""The flavor's latency target and the guest's latency through the loop."""

import dataclasses

from ufo_agent.tests.unit.service import fakes


def test_the_flavor_s_target_is_in_the_controller_s_spec():
    driver = fakes.FakeDriver()
    guest = driver.add(fakes.FakeGuest('g1', 2))
    guest.info = dataclasses.replace(guest.info, latency_target_us=1500,
                                     latency_percentile=99.9)
    plain = driver.add(fakes.FakeGuest('g2', 2))
    agent, tick = fakes.ticking_agent(driver)
    tick()
    spec = agent.specs['g1']
    assert (spec.latency_target_us, spec.latency_percentile) == (1500, 99.9)
    assert agent.specs[plain.info.uuid].latency_target_us is None
