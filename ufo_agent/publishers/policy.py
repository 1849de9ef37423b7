"""When the notification publisher sends: pure logic, no clock of its own."""


class SendPolicy:
    """When to send a signal.

    On a change of state at once, on other changes at most every
    ``min_interval`` seconds, and at least every ``keepalive_interval``.
    """

    def __init__(self, keepalive_interval, min_interval=0.0):
        if keepalive_interval <= 0:
            raise ValueError('keepalive_interval must be > 0')
        if min_interval < 0:
            raise ValueError('min_interval must be >= 0')
        self.keepalive_interval = keepalive_interval
        self.min_interval = min_interval
        self._last = None       # last signal sent
        self._last_at = None    # when, on the caller's clock

    def should_send(self, signal, now):
        if self._last is None:
            return True
        elapsed = now - self._last_at
        if elapsed < 0 or elapsed >= self.keepalive_interval:
            return True
        if signal.state != self._last.state:
            return True
        if signal.same_report(self._last):
            return False
        return elapsed >= self.min_interval

    def sent(self, signal, now):
        self._last = signal
        self._last_at = now
