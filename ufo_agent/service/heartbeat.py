"""The guests' heartbeat, on a thread of its own.

Each guest's ufo_guest module brings every vCPU back when the host's
heartbeat on its page stops moving for its watchdog (5 s by default):
the fail-safe for an agent that died. Written by the tick, it stopped
whenever one tick took long (a libvirt call waiting on a hung guest),
and every guest fell back. So a thread beats every ``interval`` seconds,
whatever the tick is doing, as long as the loop is alive: it beats only
while the last tick completed within ``window`` seconds
(``progress()`` tells when). An agent stuck for longer stops beating, so
its guests fall back as if it had died, and systemd's watchdog kills and
restarts it (the unit's ``ExecStopPost`` restores the guests).
"""

import logging
import threading
import time

from ufo_agent.driver import base

LOG = logging.getLogger(__name__)


class Heartbeat:
    """Calls ``driver.heartbeat()`` every ``interval`` while alive."""

    def __init__(self, driver, interval, window, progress,
                 clock=time.monotonic):
        self.driver = driver
        self.interval = interval
        self.window = window
        self.progress = progress
        self.clock = clock
        self.beats = 0
        self.beating = True
        self._last_error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run,
                                        name='ufo-heartbeat', daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(max(1.0, 2 * self.interval))

    def _run(self):
        while not self._stop.wait(self.interval):
            try:
                self.beat_once()
            except Exception:
                LOG.exception('Heartbeat failed')

    def beat_once(self):
        """Beat if the loop is alive; returns whether it beat."""
        stalled = self.clock() - self.progress()
        if stalled > self.window:
            if self.beating:
                self.beating = False
                LOG.error('No tick completed for %.1f s: the guests\' '
                          'heartbeat stops, so that they bring every vCPU '
                          'back', stalled)
            return False
        if not self.beating:
            self.beating = True
            LOG.warning('Ticks complete again: the guests\' heartbeat '
                        'resumes')
        try:
            self.driver.heartbeat()
        except base.DriverError as exc:
            if str(exc) != self._last_error:
                LOG.warning('Heartbeat: %s', exc)
            self._last_error = str(exc)
        else:
            self._last_error = None
        self.beats += 1
        return True
