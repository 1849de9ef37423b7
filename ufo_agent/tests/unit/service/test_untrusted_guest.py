"""What one guest does or says costs no other guest and buys it nothing.

A guest's page cannot buy it cores its vCPU threads do not use; odd
counters of one guest cost only that guest.
"""

import dataclasses

from ufo_agent.controller import plan as plan_mod
from ufo_agent.driver import base
from ufo_agent.tests.unit.service import fakes


class _RewritingDriver(fakes.FakeDriver):
    """Guest ``liar`` rewrites its page between its samples.

    It publishes a new sample every other tick only, and in between
    rewrites the last one to 400 % and 5e6 switches/s.
    """

    def observe(self, uuid):
        obs = super().observe(uuid)
        if uuid != 'liar':
            return obs
        count = self.all[uuid].count
        sample = obs.guest.sample
        sample = dataclasses.replace(
            sample, sample_count=(count + 1) // 2,
            timestamp_ns=(count + 1) // 2 * 10 ** 9)
        if not count % 2:
            sample = dataclasses.replace(
                sample, util=400.0, ctxsw_per_sec=5 * 10 ** 6,
                sched_in_per_sec=5 * 10 ** 6)
        return dataclasses.replace(
            obs, guest=dataclasses.replace(obs.guest, sample=sample))


def test_an_idle_guest_rewriting_its_page_is_parked_like_an_honest_one():
    driver = _RewritingDriver()
    honest = driver.add(fakes.FakeGuest('honest', 4))
    liar = driver.add(fakes.FakeGuest('liar', 4))
    honest.util = liar.util = 0.1       # 0.1 % of a CPU
    agent, tick = fakes.ticking_agent(driver)
    agent.start()
    believed = 0
    for _ in range(40):
        plan = tick()
        driver.check_isolation()
        if agent.status['liar'].util >= 100.0:
            believed += 1
    assert believed == 0
    for uuid in ('honest', 'liar'):
        assert plan.vms[uuid].mode == plan_mod.VmMode.IDLE, uuid
        assert not plan.vms[uuid].cores
    assert 'without a new sample count' in agent.status['liar'].reason


class _NicDriver(fakes.FakeDriver):
    """Every guest has a NIC; ``odd`` counts packets out but no bytes."""

    def observe(self, uuid):
        obs = super().observe(uuid)
        n = self.all[uuid].count
        out_bytes = 0 if uuid == 'odd' else 1500 * 800 * n
        return dataclasses.replace(obs, nics={'tap0': base.NicCounters(
            1000 * n, 800 * n, 1500 * 1000 * n, out_bytes)})


def test_one_guest_s_odd_nic_counters_cost_no_tick():
    driver = _NicDriver()
    odd = driver.add(fakes.FakeGuest('odd', 4))
    a = driver.add(fakes.FakeGuest('a', 4))
    odd.util, a.util = 20.0, 20.0
    agent, tick = fakes.ticking_agent(driver)
    agent.start()
    for t in range(30):
        if t == 15:
            odd.util = a.util = 350.0       # both busy: 'a' grows
        plan = tick()
        assert plan is not None and plan.time == agent.clock()
        for guest in (odd, a):
            assert guest.vcpu_pins == plan.vms[guest.info.uuid].cpus
        driver.check_isolation()
    assert agent.tick_errors == 0
    assert len(plan.vms['a'].cores) == 2
