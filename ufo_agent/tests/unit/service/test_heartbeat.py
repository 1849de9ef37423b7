"""The guests' heartbeat beats from its own thread while the loop lives."""

import logging
import threading
import time

from ufo_agent.controller import ControllerConfig
from ufo_agent.driver import base
from ufo_agent.service import heartbeat
from ufo_agent.service import loop
from ufo_agent.service import settings as settings_mod
from ufo_agent.tests.unit.service import fakes


class _Beats:
    def __init__(self):
        self.count = 0
        self.error = None

    def heartbeat(self):
        self.count += 1
        if self.error:
            raise base.DriverError(self.error)


def _wait_until(pred, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, 'condition not reached'
        time.sleep(0.005)


def test_beats_only_while_a_tick_completed_within_the_window(caplog):
    driver, now, progress = _Beats(), [100.0], [100.0]
    hb = heartbeat.Heartbeat(driver, 0.5, 8.0, lambda: progress[0],
                             clock=lambda: now[0])
    assert hb.beat_once() and driver.count == 1
    now[0] = 108.0                       # on the edge: still alive
    assert hb.beat_once() and driver.count == 2
    now[0] = 108.5                       # stuck: the guests fall back
    with caplog.at_level(logging.ERROR):
        assert not hb.beat_once()
    assert driver.count == 2 and not hb.beating
    assert 'No tick completed for 8.5 s' in caplog.text
    assert not hb.beat_once() and driver.count == 2
    progress[0] = 109.0                  # a tick completed: beat again
    now[0] = 109.2
    assert hb.beat_once() and driver.count == 3 and hb.beating


def test_a_failing_heartbeat_is_logged_once_and_beating_goes_on(caplog):
    driver = _Beats()
    driver.error = 'heartbeat failed for x: closed'
    hb = heartbeat.Heartbeat(driver, 0.5, 8.0, lambda: 0.0,
                             clock=lambda: 1.0)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert hb.beat_once()
    assert caplog.text.count('Heartbeat: heartbeat failed') == 1
    assert driver.count == 3


class _SlowDriver(fakes.FakeDriver):
    """observe() of one guest waits: a tick stuck in a slow call."""

    def __init__(self):
        super().__init__()
        self.slow = None
        self.in_slow = threading.Event()
        self.beats = 0

    def observe(self, uuid):
        if uuid == self.slow:
            self.in_slow.set()
            time.sleep(1.0)
        return super().observe(uuid)

    def heartbeat(self):
        self.beats += 1


def test_the_heartbeat_goes_on_while_a_tick_is_slow():
    driver = _SlowDriver()
    driver.add(fakes.FakeGuest('a', 4))
    driver.add(fakes.FakeGuest('b', 4))
    agent = loop.Agent(driver, frozenset(c for g in driver.siblings
                                         for c in g), ControllerConfig(),
                       settings_mod.AgentSettings())
    agent.start()
    agent.tick()
    settings = agent.settings
    hb = heartbeat.Heartbeat(driver, 0.02, settings.liveness_window(1.0),
                             lambda: agent.last_progress)
    hb.start()
    try:
        driver.slow = 'a'
        ticker = threading.Thread(target=agent.tick)
        ticker.start()
        assert driver.in_slow.wait(5)
        before = driver.beats
        ticker.join(10)
        # About 50 beats in that second; generous for a loaded machine.
        assert driver.beats - before >= 10
    finally:
        hb.stop()
    assert agent.ticks == 2


def test_the_liveness_window_is_three_ticks_and_one_libvirt_deadline():
    settings = settings_mod.AgentSettings(libvirt_call_timeout=5.0)
    assert settings.liveness_window(1.0) == 8.0
    assert settings.liveness_window(2.0) == 11.0
