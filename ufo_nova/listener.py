"""The notification listener that feeds the signal cache.

:class:`SignalEndpoint` decodes ``ufo.host.signal`` notifications into the
cache; a malformed payload or one of an unknown major version is logged and
dropped (acknowledged), never raised into the scheduler.

:func:`ensure_listening` starts, once per process, an oslo.messaging
notification listener in its own pool (``<prefix>.<hostname>.<pid>``), so
that every scheduler worker process receives every host's signals. It is
called on each scheduling request and is cheap after the first call; it
checks the process id, so that worker processes forked by nova-scheduler
after the plugins were loaded start their own listener and cache.
:func:`stop_listening` stops it; :mod:`ufo_nova.lifecycle` calls it when
nova-scheduler's service stops or is reset.
"""

import os
import socket
import threading

from oslo_log import log as logging
import oslo_messaging

from ufo_agent.hostsignal import payload as wire
from ufo_nova import cache as signal_cache
from ufo_nova import conf as ufo_conf

LOG = logging.getLogger(__name__)


class SignalEndpoint:
    """oslo.messaging notification endpoint for host signals."""

    filter_rule = oslo_messaging.NotificationFilter(
        event_type='^%s$' % wire.EVENT_TYPE.replace('.', r'\.'))

    def __init__(self, cache):
        self.cache = cache

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self.receive(publisher_id, payload)

    warn = info

    def receive(self, publisher_id, raw):
        """Decode and store one payload; return True when stored.

        Never raises: the message is acknowledged either way, so that a bad
        message is not redelivered forever.
        """
        try:
            decoded = wire.HostSignalPayload.from_dict(raw)
            stored = self.cache.update(decoded)
        except wire.PayloadError as exc:
            LOG.warning('Dropped host signal from %s: %s', publisher_id, exc)
            return False
        except Exception:
            LOG.exception('Dropped undecodable host signal from %s',
                          publisher_id)
            return False
        LOG.debug('Host signal from %s for host %s: %s seq %d%s',
                  publisher_id, decoded.host, decoded.signal.state,
                  decoded.signal.sequence,
                  '' if stored else ' (older than cached, ignored)')
        return stored


def pool_name(conf):
    return '%s.%s.%d' % (conf.ufo.listener_pool_prefix,
                         socket.gethostname(), os.getpid())


class SignalListener:
    """A started notification listener feeding one cache."""

    def __init__(self, conf, cache, transport=None, pool=None):
        self._owns_transport = transport is None
        self.transport = (transport if transport is not None else
                          oslo_messaging.get_notification_transport(conf))
        self.pool = pool or pool_name(conf)
        # By name: the transport's default exchange is nova-scheduler's
        # control_exchange (nova), not the agent's.
        targets = [oslo_messaging.Target(
            topic=topic, exchange=conf.ufo.notification_exchange)
            for topic in conf.ufo.notification_topics]
        self.endpoint = SignalEndpoint(cache)
        self.started = threading.Event()
        # Start and stop may race (a service stopping while the broker is
        # being reached): whichever comes second stops the poller, so that
        # none is left running and stop() never waits for the broker.
        self._lock = threading.Lock()
        self._starting = False
        self._stopped = False
        self._listener = oslo_messaging.get_notification_listener(
            self.transport, targets, [self.endpoint], executor='threading',
            pool=self.pool)

    def start(self):
        # Declaring the queue waits for the broker; do it in the background
        # so that a broker outage never blocks a scheduling request.
        with self._lock:
            if self._stopped or self._starting:
                return None
            self._starting = True
        thread = threading.Thread(target=self._start, daemon=True,
                                  name='ufo-signal-listener')
        thread.start()
        return thread

    def _start(self):
        try:
            self._listener.start()
        except Exception:
            LOG.exception('Could not start the UFO host signal listener; '
                          'hosts count as unknown')
            started = False
        else:
            started = True
        with self._lock:
            self._starting = False
            if not self._stopped:
                if started:
                    self.started.set()
                    LOG.info('Listening for UFO host signals in pool %s',
                             self.pool)
                return
        # stop() came while the broker was being reached.
        self._shutdown(started)

    def stop(self):
        """Stop the poller and wait for it; idempotent.

        Never blocks on the broker: a start in progress stops the poller
        itself once it is done.
        """
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            if self._starting:
                return
        self._shutdown(self.started.is_set())

    def _shutdown(self, started):
        try:
            if started:
                self._listener.stop()
                self._listener.wait()
                LOG.info('Stopped listening for UFO host signals in pool %s',
                         self.pool)
        finally:
            if self._owns_transport:
                self.transport.cleanup()


# Process-wide state: one cache and one listener per process.
_lock = threading.Lock()
_pid = None
_cache = None
_listener = None
_FAILED = object()


def _check_pid():
    global _pid, _cache, _listener
    if _pid != os.getpid():
        # First use, or a worker forked after the parent loaded us: the
        # parent's listener thread and connection do not exist here.
        _pid = os.getpid()
        _cache = None
        _listener = None


def get_cache(conf=None):
    """The signal cache of this process."""
    global _cache
    if _pid == os.getpid() and _cache is not None:
        return _cache
    conf = conf or ufo_conf.CONF
    with _lock:
        _check_pid()
        if _cache is None:
            _cache = signal_cache.SignalCache(conf.ufo.signal_max_age)
        return _cache


def ensure_listening(conf=None, transport=None):
    """Start this process's listener unless running or disabled.

    :param transport: an oslo.messaging notification transport to listen
        on instead of nova's (tests); it starts the listener even when
        ``[ufo] start_listener`` is off.
    """
    global _listener
    if _pid == os.getpid() and _listener is not None:
        return _listener if _listener is not _FAILED else None
    conf = conf or ufo_conf.CONF
    if not conf.ufo.start_listener and transport is None:
        return None
    cache = get_cache(conf)
    with _lock:
        _check_pid()
        if _listener is None:
            try:
                _listener = SignalListener(conf, cache, transport=transport)
            except Exception:
                LOG.exception('Could not create the UFO host signal '
                              'listener; hosts count as unknown')
                _listener = _FAILED
                return None
            _listener.start()
        return _listener


def current():
    """This process's running (or starting) listener, or None."""
    found = _listener if _pid == os.getpid() else None
    return None if found is _FAILED else found


def stop_listening():
    """Stop this process's listener and wait for it; keep the cache.

    For a service stop or reset: the signals received so far stay usable
    until they are stale (``[ufo] signal_max_age``), so that a restarted
    service does not see every host as unknown; the next request starts a
    new listener.
    """
    global _listener
    with _lock:
        if _pid != os.getpid():
            return  # the parent's listener: none runs in this process
        found, _listener = _listener, None
    if found is not None and found is not _FAILED:
        found.stop()


def use_cache(cache):
    """Make ``cache`` this process's signal cache, with no listener.

    For a process that feeds the cache itself: the cluster simulator,
    whose cache runs on simulated time.
    """
    global _pid, _cache, _listener
    reset()
    with _lock:
        _pid = os.getpid()
        _cache = cache
        _listener = _FAILED


def reset():
    """Stop the listener and forget the cache (tests)."""
    global _pid, _cache, _listener
    with _lock:
        listener, _listener = _listener, None
        _cache = None
        _pid = None
    if listener is not None and listener is not _FAILED:
        listener.stop()
