"""How many of the hosts it schedules on the scheduler has signals for.

Every ``[ufo] signal_report_interval`` seconds at most, the first
scheduling request of a worker process logs at INFO how many of the
hosts it considered have a fresh signal, a stale one and none, naming
the hosts without a fresh signal and the hosts that signals came from
but that were not among those considered. A host that gets no signal
while signals arrive under a name no request considers is most often an
agent that reports under another host name than Nova's ``[DEFAULT]
host``: with ``fail-open`` UFO then does nothing on that host, with
``fail-closed`` the host takes no VM.
"""

import collections
import threading
import time

from oslo_log import log as logging

from ufo_nova import cache

LOG = logging.getLogger(__name__)

#: Host names listed per category in one log line, at most.
MAX_NAMES = 10


class Coverage(collections.namedtuple(
        'Coverage', 'fresh stale missing unmatched')):
    """Host names by what the cache holds for them.

    ``fresh``, ``stale`` and ``missing`` partition the hosts considered;
    ``unmatched`` are the cached hosts that were not considered.
    """

    __slots__ = ()


def count(snapshot, hosts):
    """The :class:`Coverage` of ``hosts`` (names) in ``snapshot``."""
    fresh, stale, missing = [], [], []
    considered = set()
    for host in hosts:
        if host in considered:
            continue
        considered.add(host)
        found = snapshot.lookup(host)
        if found.state != cache.UNKNOWN:
            fresh.append(host)
        elif found.signal is not None:
            stale.append(host)
        else:
            missing.append(host)
    unmatched = sorted(set(snapshot.hosts()) - considered)
    return Coverage(sorted(fresh), sorted(stale), sorted(missing), unmatched)


def _names(hosts):
    shown = ', '.join(hosts[:MAX_NAMES])
    if len(hosts) > MAX_NAMES:
        shown += ' and %d more' % (len(hosts) - MAX_NAMES)
    return shown


def describe(coverage):
    """The log line of a :class:`Coverage`."""
    total = (len(coverage.fresh) + len(coverage.stale)
             + len(coverage.missing))
    text = ('UFO host signals of the %d hosts considered: %d fresh, %d '
            'stale, %d without any'
            % (total, len(coverage.fresh), len(coverage.stale),
               len(coverage.missing)))
    if coverage.stale:
        text += '; stale: %s' % _names(coverage.stale)
    if coverage.missing:
        text += '; without any: %s' % _names(coverage.missing)
    if coverage.unmatched:
        text += ('; signals also come from hosts not considered: %s'
                 % _names(coverage.unmatched))
        if coverage.missing:
            text += (' (an agent may report under another name than '
                     'Nova\'s [DEFAULT] host of its compute node)')
    return text


class Reporter:
    """Logs a :class:`Coverage` at most once per interval."""

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._next = None

    def due(self, interval):
        """True at most once per ``interval`` seconds (never if <= 0).

        The first call is due: a scheduler that just started says what it
        has at once.
        """
        if interval <= 0:
            return False
        now = self._clock()
        with self._lock:
            if self._next is not None and now < self._next:
                return False
            self._next = now + interval
        return True

    def report(self, snapshot, hosts):
        """Log the coverage of ``hosts`` at INFO; return it."""
        coverage = count(snapshot, hosts)
        LOG.info('%s', describe(coverage))
        return coverage


_reporter = Reporter()


def due(interval):
    """Whether this process logs its coverage now (:meth:`Reporter.due`)."""
    return _reporter.due(interval)


def report(snapshot, hosts):
    """Log the coverage of ``hosts`` (host names) at INFO; return it."""
    return _reporter.report(snapshot, hosts)


def reset():
    """Make the next call due (tests)."""
    global _reporter
    _reporter = Reporter()
