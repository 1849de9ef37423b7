"""The agent loop over an in-memory driver."""

import dataclasses
import logging
import re

from ufo_agent.controller import ControllerConfig
from ufo_agent.controller import reason
from ufo_agent.driver import base
from ufo_agent.service import loop
from ufo_agent.service import settings as settings_mod
from ufo_agent import state
from ufo_agent.tests.unit.service import fakes


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _agent(driver, tmp_path=None, **settings):
    clock = _Clock()
    store = state.StateStore(str(tmp_path)) if tmp_path else None
    agent = loop.Agent(driver, frozenset(c for g in driver.siblings
                                         for c in g),
                       ControllerConfig(),
                       settings_mod.AgentSettings(**settings),
                       store=store, clock=clock)

    def tick():
        clock.now += 1.0
        driver.clock = clock.now
        return agent.tick()
    return agent, tick


def test_start_adopts_guests_and_ticks_enforce_the_plan():
    driver = fakes.FakeDriver()
    a = driver.add(fakes.FakeGuest('a', 8))
    b = driver.add(fakes.FakeGuest('b', 4, channel=False))
    agent, tick = _agent(driver)
    agent.start()
    assert set(agent.guests) == {'a', 'b'}
    for _ in range(3):
        plan = tick()
    assert a.vcpu_pins == plan.vms['a'].cpus
    assert b.vcpu_pins == plan.vms['b'].cpus
    assert agent.status['a'].signal == 'guest'
    assert agent.status['b'].signal == 'host-only'
    assert agent.status['b'].reason == 'no guest channel'
    assert ('target', 'b', 4) not in driver.calls      # no channel
    # The heartbeat has a thread of its own (service/heartbeat.py).
    assert ('heartbeat',) not in driver.calls


def test_lying_guest_falls_back_to_host_only_and_others_carry_on():
    driver = fakes.FakeDriver()
    liar = driver.add(fakes.FakeGuest('liar', 4))
    driver.add(fakes.FakeGuest('honest', 4))
    agent, tick = _agent(driver)
    agent.start()
    liar.lie = True
    for _ in range(3):
        tick()
    assert agent.status['liar'].signal == 'host-only'
    assert 'claims' in agent.status['liar'].reason
    assert agent.status['honest'].signal == 'guest'


def test_only_a_guest_at_fault_is_warned_about(caplog):
    driver = fakes.FakeDriver()
    liar = driver.add(fakes.FakeGuest('liar', 4))
    driver.add(fakes.FakeGuest('honest', 4))
    driver.add(fakes.FakeGuest('plain', 4, channel=False))
    agent, tick = _agent(driver)
    agent.start()
    liar.lie = True
    with caplog.at_level(logging.INFO, logger='ufo_agent.service.loop'):
        for _ in range(3):
            tick()
    signals = [(r.levelno, r.getMessage()) for r in caplog.records
               if ' signal: ' in r.getMessage()]
    warned = [m for level, m in signals if level >= logging.WARNING]
    # Host-only before its samples can be checked, or without a module:
    # every guest at a start, not worth a warning each.
    assert any('honest signal: host-only' in m for _, m in signals)
    assert any('plain signal: host-only' in m for _, m in signals)
    assert len(warned) == 1 and 'liar signal: host-only' in warned[0]
    assert 'claims' in warned[0]


def test_dry_run_decides_but_touches_nothing(caplog):
    driver = fakes.FakeDriver()
    guest = driver.add(fakes.FakeGuest('a', 8))
    agent, tick = _agent(driver, dry_run=True)
    agent.start()
    with caplog.at_level(logging.INFO, logger='ufo_agent.decisions'):
        for _ in range(8):
            tick()
    assert guest.vcpu_pins is None and guest.online == 8
    assert not [c for c in driver.calls if c[0] in ('pin_vcpus', 'target')]
    assert 'action=probe' in caplog.text
    # Each decision's line ends with the rule that decided it, and
    # /status has the rule of each guest's note beside its text.
    assert re.search(r'action=probe cores=\d+->\d+ reason="[^"]+" '
                     r'rule=[a-z-]+$', caplog.text, re.M)
    status = agent.status['a']
    assert status.note and status.note_rule in reason.rules()
    assert agent.cores_saved() > 0
    # Nothing to give back either: a real agent may run beside it.
    assert agent.stop() == []
    assert not [c for c in driver.calls if c[0] == 'release']


def test_lifecycle_events_and_fail_safe_stop(tmp_path):
    driver = fakes.FakeDriver()
    a = driver.add(fakes.FakeGuest('a', 8))
    driver.add(fakes.FakeGuest('b', 4))
    agent, tick = _agent(driver, tmp_path=tmp_path)
    agent.start()
    for _ in range(5):
        tick()
    # A reboot resets the guest: everything is written again.
    a.vcpu_pins, a.online = None, 8
    driver.pending_events.append(('a', base.GuestEvent.REBOOTED))
    plan = tick()
    assert a.vcpu_pins == plan.vms['a'].cpus
    # A destroyed and undefined guest leaves no state and no page.
    del driver.all['b']
    driver.pending_events.append(('b', base.GuestEvent.UNDEFINED))
    tick()
    assert 'b' not in agent.guests and ('forget', 'b') in driver.calls
    assert not (tmp_path / 'b.json').exists()
    # A clean stop gives every guest back and saves what it learned.
    assert agent.stop() == []
    assert ('release', 'a') in driver.calls
    assert a.online == 8 and a.vcpu_pins == frozenset(range(64))
    assert (tmp_path / 'a.json').exists()


class _Recorder:
    def __init__(self):
        self.signals = []
        self.closed = False

    def publish(self, signal):
        self.signals.append(signal)

    def close(self):
        self.closed = True


def test_every_tick_publishes_the_host_signal_and_stop_closes():
    from ufo_agent import hostsignal
    driver = fakes.FakeDriver(cores=3)
    for name in ('a', 'b', 'c'):
        guest = driver.add(fakes.FakeGuest(name, 4))
        guest.util = 380.0                      # each wants all its cores
    recorder = _Recorder()
    tracker = hostsignal.HostSignalTracker(hostsignal.Windows(
        overloaded_after=2.0, overloaded_clear_after=2.0,
        underloaded_after=2.0, saturated_after=2.0))
    agent, tick = _agent(driver)
    agent.signal_tracker, agent.publishers = tracker, recorder
    agent.wallclock = agent.clock
    agent.start()
    for _ in range(6):
        plan = tick()
    assert plan.overloaded
    assert [s.sequence for s in recorder.signals] == list(range(1, 7))
    last = recorder.signals[-1]
    assert last.state == hostsignal.OVERLOADED
    assert last.unmet_cores == plan.shortfall_cores > 0
    assert last.managed_cores == 3
    assert agent.snapshot['signal']['state'] == 'overloaded'
    agent.stop()
    assert recorder.closed


def test_dry_run_keeps_the_signal_to_itself():
    from ufo_agent import hostsignal
    driver = fakes.FakeDriver()
    driver.add(fakes.FakeGuest('a', 4))
    recorder = _Recorder()
    agent, tick = _agent(driver, dry_run=True)
    agent.signal_tracker = hostsignal.HostSignalTracker()
    agent.publishers = recorder
    agent.start()
    tick()
    assert agent.signal is not None and recorder.signals == []


def test_a_plan_that_breaks_an_invariant_never_reaches_the_driver(caplog):
    driver = fakes.FakeDriver()
    a = driver.add(fakes.FakeGuest('a', 8))
    b = driver.add(fakes.FakeGuest('b', 8))
    agent, tick = _agent(driver)
    agent.start()
    for _ in range(3):
        good = tick()
    pins = (a.vcpu_pins, b.vcpu_pins, a.emulator_pins)
    real_tick = agent.controller.tick

    def broken_tick(*args):
        plan = real_tick(*args)
        # Give b a's cores as well: a CPU in two pools.
        vms = dict(plan.vms)
        vms['b'] = dataclasses.replace(
            vms['b'], cores=vms['a'].cores | vms['b'].cores,
            cpus=vms['a'].cpus | vms['b'].cpus)
        return dataclasses.replace(plan, vms=vms)

    agent.controller.tick = broken_tick
    driver.calls.clear()
    with caplog.at_level(logging.ERROR):
        returned = tick()
    assert not [c for c in driver.calls
                if c[0] in ('pin_vcpus', 'pin_emulator', 'target')]
    assert (a.vcpu_pins, b.vcpu_pins, a.emulator_pins) == pins
    assert returned is good and agent.last_plan is good
    assert agent.invariant_violations == 1
    assert 'invariant 1' in caplog.text
    assert agent.snapshot['invariant_violations'] == 1
    # The next good plan is applied again.
    agent.controller.tick = real_tick
    tick()
    assert agent.invariant_violations == 1
    driver.check_isolation()


def test_a_guest_that_waits_the_same_way_is_logged_once(caplog):
    driver = fakes.FakeDriver()
    driver.add(fakes.FakeGuest('a', 4))
    agent, tick = _agent(driver)
    agent.start()
    apply = agent.enforcer.apply
    reason = ['vcpu pins wait for CPUs held by b vcpu']

    def waiting(plan, online=None):
        outcome = apply(plan, online)
        return dataclasses.replace(outcome, deferred={'a': reason[0]})
    agent.enforcer.apply = waiting
    with caplog.at_level(logging.INFO, logger='ufo_agent.service.loop'):
        for _ in range(5):
            tick()
        reason[0] = 'vcpu pins wait for CPUs held by c vcpu'
        for _ in range(5):
            tick()
    waits = [r for r in caplog.records if r.levelno == logging.INFO and
             'pins wait' in r.getMessage()]
    assert [r.getMessage() for r in waits] == [
        'Guest a: vcpu pins wait for CPUs held by b vcpu',
        'Guest a: vcpu pins wait for CPUs held by c vcpu']


def test_the_drift_check_reads_a_share_of_the_guests_each_tick():
    driver = fakes.FakeDriver()
    for i in range(10):
        driver.add(fakes.FakeGuest('g%d' % i, 2, channel=False))
    agent, tick = _agent(driver, drift_check_interval=5.0)
    agent.start()
    tick()
    read = []
    real = driver.read_pins
    driver.read_pins = lambda uuid: read.append(uuid) or real(uuid)
    per_tick = []
    for _ in range(10):
        before = len(read)
        tick()
        per_tick.append(len(read) - before)
    assert per_tick == [2] * 10
    assert sorted(read) == sorted(2 * sorted(driver.all))


def test_the_status_shows_each_plan_once_and_follows_its_changes(
        monkeypatch):
    driver = fakes.FakeDriver()
    driver.add(fakes.FakeGuest('a', 8))
    driver.add(fakes.FakeGuest('b', 4, channel=False))
    agent, tick = _agent(driver)
    agent.start()
    shown = []
    real_cpu_list = loop._cpu_list

    def cpu_list(cpus):
        shown.append(cpus)
        return real_cpu_list(cpus)
    monkeypatch.setattr(loop, '_cpu_list', cpu_list)
    plans = [tick() for _ in range(12)]
    # Shown again only for a plan not shown before (a guest's plan is
    # the very one of the last tick while nothing changed).
    new = sum(1 for before, after in zip([None] + plans, plans)
              for uuid in after.vms
              if before is None or before.vms[uuid] is not after.vms[uuid])
    assert len(shown) == new < 2 * len(plans)
    for uuid, vm in plans[-1].vms.items():
        status = agent.status[uuid]
        assert (status.mode, status.cores, status.cpus,
                status.target_vcpus, status.wanted_cores, status.r2) == (
            vm.mode.value, len(vm.cores), real_cpu_list(vm.cpus),
            vm.online_vcpus, vm.wanted_cores, vm.model_r2)
    # A guest adopted again has a new status: shown on it at once.
    agent._drop('a', keep_state=True)
    plan = tick()
    assert agent.status['a'].cpus == real_cpu_list(plan.vms['a'].cpus)
