"""Publishers: carry each host signal out of ufo-agent.

A publisher is a stevedore plugin in the ``ufo_agent.publishers``
namespace, chosen by ``[publishers] enabled``. Its class is called as
``cls(conf, host, nodename)`` and the object has two methods:

``publish(signal)``
    Called with every :class:`ufo_agent.hostsignal.HostSignal` the agent
    computes (once per controller tick). The publisher decides itself what
    to send: the notification publisher sends on change and at the
    keep-alive interval, the placement publisher acts on entering and
    leaving overload. It must not raise for a transient outage: it logs and
    tries again on a later call.
``close()``
    Called once at agent shutdown: release connections and undo what must
    not outlive the agent (the placement publisher clears its trait).

:func:`load` returns a :class:`PublisherSet` that calls every enabled
publisher and isolates their failures from each other.
"""

import abc
import socket
import threading

from oslo_log import log as logging
from stevedore import named

LOG = logging.getLogger(__name__)
NAMESPACE = 'ufo_agent.publishers'


class Publisher(metaclass=abc.ABCMeta):
    """The interface of a publisher plugin."""

    def __init__(self, conf, host, nodename):
        self.conf = conf
        self.host = host
        self.nodename = nodename

    @abc.abstractmethod
    def publish(self, signal):
        """Publish one host signal."""

    def close(self):
        """Release resources at agent shutdown."""


class PublisherSet:
    """The enabled publishers, called in configuration order."""

    def __init__(self, publishers):
        self.publishers = list(publishers)

    def publish(self, signal):
        for publisher in self.publishers:
            try:
                publisher.publish(signal)
            except Exception:
                LOG.exception('Publisher %s failed to publish signal %d',
                              type(publisher).__name__, signal.sequence)

    def close(self):
        for publisher in self.publishers:
            try:
                publisher.close()
            except Exception:
                LOG.exception('Publisher %s failed to close',
                              type(publisher).__name__)


class BackgroundPublisher:
    """Publishes from a thread of its own, so the agent loop never waits.

    A broker or Placement outage can hold one send for many seconds (a
    refused AMQP connection with retries takes about 9 s), longer than the
    guests' heartbeat watchdog. :meth:`publish` only stores the signal;
    the thread sends the newest one it finds, so signals that pile up
    during an outage are coalesced into the latest, which is all a
    receiver needs. :meth:`close` sends the last signal, then closes the
    publishers (the placement one clears its trait).
    """

    def __init__(self, inner, close_timeout=30.0):
        self._inner = inner
        self._close_timeout = close_timeout
        self._cond = threading.Condition()
        self._pending = None
        self._closing = False
        self._thread = threading.Thread(target=self._run,
                                        name='ufo-publishers', daemon=True)
        self._thread.start()

    def publish(self, signal):
        with self._cond:
            self._pending = signal
            self._cond.notify()

    def _run(self):
        while True:
            with self._cond:
                while self._pending is None and not self._closing:
                    self._cond.wait()
                signal, self._pending = self._pending, None
                if signal is None:
                    return
            self._inner.publish(signal)

    def close(self):
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(self._close_timeout)
        if self._thread.is_alive():
            LOG.warning('Publishers still busy after %.0f s; closing them '
                        'anyway', self._close_timeout)
        self._inner.close()


def host_and_node(conf, hypervisor_hostname=None):
    """The signal's host and node names.

    ``hypervisor_hostname`` is libvirt's name of the host, which Nova's
    libvirt driver gives the compute node; the node name falls back to the
    host when it is not known either.
    """
    host = conf.publishers.host or socket.gethostname()
    return host, conf.publishers.nodename or hypervisor_hostname or host


def load(conf, hypervisor_hostname=None):
    """Load the publishers of ``[publishers] enabled``.

    :raises ValueError: naming the option, when an enabled name has no
        plugin.
    """
    names = conf.publishers.enabled
    host, nodename = host_and_node(conf, hypervisor_hostname)

    def missing(names_missing):
        raise ValueError(
            '[publishers] enabled names unknown publisher(s) %s; installed: '
            '%s' % (', '.join(sorted(names_missing)),
                    ', '.join(sorted(available())) or 'none'))

    if not names:
        return PublisherSet([])
    manager = named.NamedExtensionManager(
        NAMESPACE, names, invoke_on_load=True,
        invoke_args=(conf, host, nodename), name_order=True,
        on_missing_entrypoints_callback=missing,
        propagate_map_exceptions=True, on_load_failure_callback=_load_failed)
    return PublisherSet(ext.obj for ext in manager.extensions)


def _load_failed(manager, entrypoint, exc):
    raise exc


def available():
    from stevedore import extension
    return extension.ExtensionManager(NAMESPACE).names()
