"""The signal cache: the latest host signal of every host, in one process.

Thread safety: every method takes one :class:`threading.Lock` for a few
dictionary operations and never blocks, sleeps or does I/O while holding
it. Under eventlet monkey patching the lock is a green lock, under native
threads a real one; both are safe because no switch can happen inside the
critical section except on the lock itself.
"""

import collections
import threading
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: The state of a host with no usable signal (missing or stale).
UNKNOWN = 'unknown'


class Lookup(collections.namedtuple('Lookup', 'state signal age')):
    """What the cache knows about one host right now.

    ``state`` is one of the host-signal states, or :data:`UNKNOWN`, in which
    case ``signal`` is the stale signal or ``None``. ``age`` is seconds
    since the signal was received. (A named tuple: the scheduler makes one
    per host and request.)
    """

    __slots__ = ()

    def __new__(cls, state, signal=None, age=None):
        return super().__new__(cls, state, signal, age)


_UNKNOWN = Lookup(UNKNOWN)


class _Entry:
    """A stored signal, with its fresh Lookup built once on receipt."""

    __slots__ = ('payload', 'received_at', 'fresh', 'reclaimable')

    def __init__(self, payload, received_at):
        self.payload = payload
        self.received_at = received_at
        self.fresh = Lookup(payload.signal.state, payload.signal, None)
        self.reclaimable = payload.signal.reclaimable_cores


def _lookup(entry, now, max_age):
    if entry is None:
        return _UNKNOWN
    age = now - entry.received_at
    if age > max_age:
        return Lookup(UNKNOWN, entry.payload.signal, age)
    return entry.fresh


class Snapshot:
    """Read-only copy of a :class:`SignalCache` taken at one instant."""

    __slots__ = ('_entries', '_now', '_max_age')

    def __init__(self, entries, now, max_age):
        self._entries = entries
        self._now = now
        self._max_age = max_age

    def lookup(self, host):
        """Like :meth:`SignalCache.lookup`, at the snapshot's instant.

        ``age`` is only set for stale signals.
        """
        entry = self._entries.get(host)
        if entry is None:
            return _UNKNOWN
        if self._now - entry.received_at > self._max_age:
            return Lookup(UNKNOWN, entry.payload.signal,
                          self._now - entry.received_at)
        return entry.fresh

    def reclaimable_cores(self, host):
        """Reclaimable cores of a host, 0 when unknown (missing or stale).

        The weigher's per-host call: no Lookup is built.
        """
        entry = self._entries.get(host)
        if entry is None or self._now - entry.received_at > self._max_age:
            return 0
        return entry.reclaimable

    def hosts(self):
        """Names of the hosts with a signal, fresh or stale."""
        return list(self._entries)

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
        self._entries = {}  # host -> _Entry

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
                old_signal = old.payload.signal
                if (old_signal.source == payload.signal.source
                        and payload.signal.sequence <= old_signal.sequence):
                    return False
            self._entries[payload.host] = _Entry(payload, now)
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
