"""The signal cache: the latest host signal of every host, in one process.

Thread safety: every method takes one :class:`threading.Lock` for a few
dictionary operations and never blocks, sleeps or does I/O while holding
it. Under eventlet monkey patching the lock is a green lock, under native
threads a real one; both are safe because no switch can happen inside the
critical section except on the lock itself.
"""

import dataclasses
import threading
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: The state of a host with no usable signal (missing or stale).
UNKNOWN = 'unknown'


@dataclasses.dataclass(frozen=True)
class Lookup:
    """What the cache knows about one host right now.

    ``state`` is one of the host-signal states, or :data:`UNKNOWN`, in which
    case ``signal`` is the stale signal or ``None``.
    """

    state: str
    signal: object = None
    age: float = None


_UNKNOWN = Lookup(UNKNOWN)


def _lookup(entry, now, max_age):
    if entry is None:
        return _UNKNOWN
    payload, received_at = entry
    age = now - received_at
    if age > max_age:
        return Lookup(UNKNOWN, payload.signal, age)
    return Lookup(payload.signal.state, payload.signal, age)


class Snapshot:
    """Read-only copy of a :class:`SignalCache` taken at one instant."""

    __slots__ = ('_entries', '_now', '_max_age')

    def __init__(self, entries, now, max_age):
        self._entries = entries
        self._now = now
        self._max_age = max_age

    def lookup(self, host):
        return _lookup(self._entries.get(host), self._now, self._max_age)

    def __len__(self):
        return len(self._entries)


class SignalCache:
    """Latest :class:`HostSignalPayload` per compute host name."""

    def __init__(self, max_age, clock=time.monotonic):
        if max_age <= 0:
            raise ValueError('max_age must be > 0, got %r' % (max_age,))
        self.max_age = max_age
        self._clock = clock
        self._lock = threading.Lock()
        self._entries = {}  # host -> (payload, received_at)

    def update(self, payload):
        """Store ``payload`` unless it is older than what is cached.

        A payload from the same source (agent run) with a sequence number
        not above the cached one is a duplicate or arrived out of order and
        is ignored. A new source (restarted agent) always replaces.
        Returns True when stored.
        """
        now = self._clock()
        with self._lock:
            old = self._entries.get(payload.host)
            if old is not None:
                old_signal = old[0].signal
                if (old_signal.source == payload.signal.source
                        and payload.signal.sequence <= old_signal.sequence):
                    return False
            self._entries[payload.host] = (payload, now)
        return True

    def lookup(self, host):
        """The :class:`Lookup` of one host now."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(host)
        return _lookup(entry, now, self.max_age)

    def snapshot(self):
        """A consistent, lock-free view of every host at one instant.

        The scheduler takes one per request, so that all hosts are judged
        against the same data and the lock is taken once, not per host.
        """
        now = self._clock()
        with self._lock:
            entries = dict(self._entries)
        return Snapshot(entries, now, self.max_age)

    def hosts(self):
        with self._lock:
            return sorted(self._entries)

    def clear(self):
        with self._lock:
            self._entries.clear()
