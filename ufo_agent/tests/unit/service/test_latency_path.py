"""The flavor's latency target and the guest's latency through the loop."""

import dataclasses
import functools

from ufo_agent.cmd import status as status_cmd
from ufo_agent.service import metrics
from ufo_agent.tests.unit.service import fakes
from ufo_agent.tests.unit.service import test_metrics


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


def _published(tick, ticks=4):
    for _ in range(ticks):
        tick()


def test_status_and_metrics_show_the_guest_s_latency_and_freshness():
    driver = fakes.FakeDriver()
    guest = driver.add(fakes.FakeGuest('a', 4))
    guest.info = dataclasses.replace(guest.info, latency_target_us=2000)
    guest.latency_us = 1500
    driver.add(fakes.FakeGuest('b', 2))
    agent, tick = fakes.ticking_agent(driver)
    _published(tick)
    status = agent.status['a']
    assert (status.latency_us, status.latency_state, status.latency_fresh) \
        == (1500.0, 'fresh', True)
    assert (status.latency_target_us, status.latency_percentile) == \
        (2000, 99.0)
    families = test_metrics._families(metrics.render(agent.snapshot))
    value = functools.partial(test_metrics._value, families)
    assert value('ufo_vm_latency_seconds', uuid='a') == 0.0015
    assert value('ufo_vm_latency_target_seconds', uuid='a') == 0.002
    assert value('ufo_vm_latency_target_quantile', uuid='a') == 0.99
    assert value('ufo_vm_latency_age_seconds', uuid='a') == 0.0
    assert value('ufo_vm_latency_state', uuid='a', latency_state='fresh') \
        == 1
    assert value('ufo_vm_latency_state', uuid='b',
                 latency_state='absent') == 1
    # A guest without a target or a latency has no such gauges.
    assert not [s for f in families.values() for s in f.samples
                if s.name == 'ufo_vm_latency_seconds' and
                s.labels['uuid'] == 'b']
    row = status_cmd.format_status(agent.snapshot).splitlines()
    assert '1500/2000@p99' in [r for r in row if r.startswith('name-a')][0]

    # The guest's software stops publishing: stale after 3 s.
    guest.latency_live = False
    _published(tick)
    status = agent.status['a']
    assert (status.latency_us, status.latency_state, status.latency_fresh) \
        == (1500.0, 'stale', False)
    assert status.latency_age_s == 4.0
    families = test_metrics._families(metrics.render(agent.snapshot))
    assert test_metrics._value(families, 'ufo_vm_latency_state', uuid='a',
                               latency_state='stale') == 1
    row = status_cmd.format_status(agent.snapshot).splitlines()
    assert '1500(stale)/2000@p99' in \
        [r for r in row if r.startswith('name-a')][0]


def test_the_controller_gets_the_latency_only_while_fresh():
    driver = fakes.FakeDriver()
    guest = driver.add(fakes.FakeGuest('a', 4))
    guest.latency_us = 700
    agent, tick = fakes.ticking_agent(driver)
    seen = []
    observe = agent._observe

    def spy():
        samples, online, busy = observe()
        seen.append(samples['a'].latency_us if 'a' in samples else None)
        return samples, online, busy
    agent._observe = spy
    _published(tick, 4)
    guest.latency_live = False
    _published(tick, 4)
    # Tick 1: no rates yet; 2: the first report only starts the count
    # (and the guest's sample is not checkable yet); then fresh for 3 s.
    assert seen == [None, None, 700.0, 700.0, 700.0, 700.0, 700.0, None]
