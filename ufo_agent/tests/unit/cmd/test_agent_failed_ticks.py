"""Only healthy progress feeds systemd; a run of failed ticks ends it.

A tick that an exception abandoned, or whose plan broke an invariant
and was not applied, changed nothing: the guests keep pins chosen for an
older load. Such a tick must not tell systemd that the agent works, and
``[agent] max_failed_ticks`` of them in a row make the agent give every
guest back (all vCPUs online, original pins) and exit with status 1 so
that systemd starts a fresh one.
"""

import dataclasses
import signal
import socket
import threading
import time

import pytest

from ufo_agent.cmd import agent as cmd
from ufo_agent.controller import ControllerConfig
from ufo_agent.service import loop
from ufo_agent.service import sdnotify
from ufo_agent.service import settings as settings_mod
from ufo_agent.tests.unit.service import fakes


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def systemd(tmp_path):
    """A notify socket read as systemd does: (notifier, notes so far)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / 'notify')
    listener.bind(path)
    listener.settimeout(0.05)
    received, done = [], threading.Event()

    def read():
        # At once: a full queue would block the agent's sendto.
        while not done.is_set():
            try:
                received.append(listener.recv(4096).decode())
            except socket.timeout:
                continue

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    notifier = sdnotify.Notifier({'NOTIFY_SOCKET': path})

    def notes():
        notifier.notify('END=1')
        while not received or received[-1] != 'END=1':
            time.sleep(0.01)
        return received[:-1]

    yield notifier, notes
    done.set()
    reader.join()
    notifier.close()
    listener.close()


@pytest.fixture
def host(monkeypatch):
    """Two guests over the in-memory driver, and an agent that ticks."""
    # run() would take SIGTERM and SIGINT from the test runner.
    monkeypatch.setattr(signal, 'signal', lambda *args: None)
    driver = fakes.FakeDriver()
    guests = [driver.add(fakes.FakeGuest(name, 8)) for name in 'ab']
    clock = _Clock()

    def make(**settings):
        agent = loop.Agent(
            driver, frozenset(c for g in driver.siblings for c in g),
            ControllerConfig(), settings_mod.AgentSettings(**settings),
            clock=clock)
        real_tick = agent.tick

        def tick():
            clock.now += 1.0
            driver.clock = clock.now
            return real_tick()
        agent.tick = tick
        return agent
    return driver, guests, make


def _fail_from(agent, first, how='raise'):
    """Ticks ``first`` and later fail: raise, or break an invariant."""
    real = agent.controller.tick
    count = [0]

    def tick(*args):
        count[0] += 1
        plan = real(*args)
        if count[0] < first:
            return plan
        if how == 'raise':
            raise RuntimeError('controller bug')
        vms = dict(plan.vms)
        vms['b'] = dataclasses.replace(
            vms['b'], cores=vms['a'].cores | vms['b'].cores,
            cpus=vms['a'].cpus | vms['b'].cpus)
        return dataclasses.replace(plan, vms=vms)
    agent.controller.tick = tick


@pytest.mark.parametrize('how, settings, limit', [
    ('raise', {}, 10),                          # the default
    ('invariant', {'max_failed_ticks': 4}, 4),
])
def test_failed_ticks_feed_no_watchdog_and_end_in_a_full_restore(
        host, systemd, how, settings, limit):
    driver, guests, make = host
    notifier, notes = systemd
    agent = make(**settings)
    _fail_from(agent, 6, how)
    rc = cmd.run(agent, 0.0, max_ticks=100, notifier=notifier)
    assert rc == 1
    # 5 healthy ticks, then the failed ones: it gave up after the last.
    assert agent.ticks == 5 + limit and agent.failed_ticks == limit
    sent = notes()
    assert sent[0].startswith('READY=1') and sent[-1].startswith('STOPPING=1')
    assert sent[1:-1] == ['WATCHDOG=1'] * 5
    # Every guest back: all vCPUs online, exactly its original pins.
    for guest in guests:
        assert ('release', guest.info.uuid) in driver.calls
        assert guest.online == guest.info.vcpus
        assert guest.vcpu_pins == guest.info.restore_vcpu_cpus
        assert guest.emulator_pins == guest.info.restore_emulator_cpus


def test_failures_not_in_a_row_do_not_stop_the_agent(host, systemd):
    driver, guests, make = host
    notifier, notes = systemd
    agent = make(max_failed_ticks=2)
    real = agent.controller.tick
    count = [0]

    def every_other(*args):
        count[0] += 1
        if count[0] % 2 == 0:
            raise RuntimeError('controller bug')
        return real(*args)
    agent.controller.tick = every_other
    assert cmd.run(agent, 0.0, max_ticks=8, notifier=notifier) == 0
    assert agent.ticks == 8
    # Only the healthy ones (1, 3, 5, 7) told systemd.
    assert notes()[1:-1] == ['WATCHDOG=1'] * 4


def test_a_healthy_tick_resets_the_count_and_progress(host):
    driver, guests, make = host
    agent = make()
    agent.start()
    agent.tick()
    progress = agent.last_progress
    _fail_from(agent, 1, 'invariant')
    agent.tick()
    agent.tick()
    assert agent.failed_ticks == 2 and agent.last_progress == progress
    agent.controller.tick = loop.controller_mod.Controller.tick.__get__(
        agent.controller)
    agent.tick()
    assert agent.failed_ticks == 0 and agent.last_progress > progress


def test_the_guests_are_given_back_even_if_saving_state_fails(host):
    driver, guests, make = host
    agent = make()
    agent.start()
    agent.tick()

    class BrokenStore:
        def save(self, uuid, learned):
            raise RecursionError('corrupt model')

    agent.store = BrokenStore()
    assert agent.stop() == []
    for guest in guests:
        assert guest.vcpu_pins == guest.info.restore_vcpu_cpus
