"""Hysteresis from controller ticks to the host state of paper Appendix B.4.

Each tick is first classified on its own (the *raw* state):

* overloaded when the idle pool failed to supply at least
  ``overload_min_unmet_cores`` to the vCPU or emulator pools;
* underloaded when the idle pool holds more than
  ``saturated_max_idle_cores``;
* saturated otherwise.

The reported state only moves to a new raw state once that raw state has
held without interruption for the window of the transition (for example
``overloaded_after`` seconds to enter overload, ``underloaded_after`` to
become underloaded), so a single noisy tick never flips it. A new tracker
starts saturated ("send no more") until its windows have seen enough.

Overload is left on unmet demand alone: once no tick has had unmet demand
for ``overloaded_clear_after`` seconds the host leaves it, however the
idle pool moved meanwhile. It becomes underloaded if the idle pool has
also been large for ``underloaded_after``, saturated otherwise.
"""

import dataclasses
import uuid

from ufo_agent.hostsignal import model


@dataclasses.dataclass(frozen=True)
class Windows:
    """Thresholds and windows (seconds) of a :class:`HostSignalTracker`."""

    saturated_max_idle_cores: int = 2
    overload_min_unmet_cores: int = 1
    overloaded_after: float = 10.0
    overloaded_clear_after: float = 30.0
    underloaded_after: float = 30.0
    saturated_after: float = 5.0

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value < 0:
                raise ValueError('%s must be >= 0, got %r'
                                 % (field.name, value))
        if self.overload_min_unmet_cores < 1:
            raise ValueError('overload_min_unmet_cores must be >= 1')

    @classmethod
    def from_conf(cls, conf):
        """Build from the ``[signal]`` group of an oslo.config object."""
        group = conf.signal
        return cls(**{f.name: getattr(group, f.name)
                      for f in dataclasses.fields(cls)})

    def window(self, current, target):
        """Seconds ``target`` must hold before ``current`` gives way."""
        if target == model.OVERLOADED:
            return self.overloaded_after
        if current == model.OVERLOADED:
            return self.overloaded_clear_after
        if target == model.UNDERLOADED:
            return self.underloaded_after
        return self.saturated_after


class HostSignalTracker:
    """Turns a stream of :class:`~model.HostUsage` into host signals.

    Pure: no clock, no I/O. Feed it one usage per controller tick, in time
    order; each call returns the new immutable :class:`~model.HostSignal`.
    """

    def __init__(self, windows=None, source=None):
        self._windows = windows or Windows()
        self.source = source or str(uuid.uuid4())
        self._state = model.SATURATED
        self._pending = None        # raw state waiting for its window
        self._pending_since = None  # timestamp of its first tick
        self._met_since = None      # first tick of the run without unmet
        self._last_timestamp = None
        self._sequence = 0
        self.signal = None

    def classify(self, usage):
        """The raw state of one tick, before hysteresis."""
        if usage.unmet_cores >= self._windows.overload_min_unmet_cores:
            return model.OVERLOADED
        if usage.idle_cores > self._windows.saturated_max_idle_cores:
            return model.UNDERLOADED
        return model.SATURATED

    def update(self, usage):
        """Account one tick and return the resulting signal."""
        if not isinstance(usage, model.HostUsage):
            raise TypeError('expected HostUsage, got %r' % (usage,))
        now = usage.timestamp
        if self._last_timestamp is not None and now < self._last_timestamp:
            # The wall clock went back: restart the running window rather
            # than trust a negative duration.
            self._pending_since = now if self._pending else None
            self._met_since = now if self._met_since is not None else None
        self._last_timestamp = now

        raw = self.classify(usage)
        if raw == model.OVERLOADED:
            self._met_since = None
        elif self._met_since is None:
            self._met_since = now
        if raw == self._state:
            self._pending = self._pending_since = None
            return self._emit(usage)
        if raw != self._pending:
            self._pending, self._pending_since = raw, now
        if self._state == model.OVERLOADED:
            self._leave_overload(now)
        elif now - self._pending_since >= self._windows.window(
                self._state, raw):
            self._become(raw)
        return self._emit(usage)

    def _leave_overload(self, now):
        # Only unmet demand holds a host in overload: an idle pool that
        # flickers around saturated_max_idle_cores must not restart the
        # clock, or the host stays refused long after its demand is met.
        if now - self._met_since < self._windows.overloaded_clear_after:
            return
        if (self._pending == model.UNDERLOADED
                and now - self._pending_since
                >= self._windows.underloaded_after):
            self._become(model.UNDERLOADED)
        else:
            self._become(model.SATURATED)

    def _become(self, state):
        self._state = state
        if self._pending == state:
            self._pending = self._pending_since = None

    def _emit(self, usage):
        self._sequence += 1
        self.signal = model.HostSignal(
            state=self._state,
            idle_cores=usage.idle_cores,
            reclaimable_cores=usage.reclaimable_cores,
            managed_cores=usage.managed_cores,
            unmet_cores=usage.unmet_cores,
            sequence=self._sequence,
            timestamp=float(usage.timestamp),
            source=self.source)
        return self.signal
