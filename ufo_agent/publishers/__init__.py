"""Publishers: carry each host signal out of ufo-agent.

A publisher is a stevedore plugin in the ``ufo_agent.publishers``
namespace, chosen by ``[publishers] enabled``. Its class is called as
``cls(conf, host, nodename)`` and the object has these methods:

``start()``
    Called once, before the first ``publish``, from the thread that
    publishes: prepare and check what the publisher needs (the placement
    publisher creates its trait and looks its resource provider up). It
    logs what it finds and must not raise for a transient outage.
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
import dataclasses
import threading

from oslo_log import log as logging
from stevedore import named

from ufo_agent.hypervisor import nova_host

LOG = logging.getLogger(__name__)
NAMESPACE = 'ufo_agent.publishers'


class Publisher(metaclass=abc.ABCMeta):
    """The interface of a publisher plugin."""

    def __init__(self, conf, host, nodename):
        self.conf = conf
        self.host = host
        self.nodename = nodename

    def start(self):
        """Prepare and check, once, before the first signal."""

    @abc.abstractmethod
    def publish(self, signal):
        """Publish one host signal."""

    def close(self):
        """Release resources at agent shutdown."""


class PublisherSet:
    """The enabled publishers, called in configuration order."""

    def __init__(self, publishers):
        self.publishers = list(publishers)

    def start(self):
        for publisher in self.publishers:
            try:
                publisher.start()
            except Exception:
                LOG.exception('Publisher %s failed to start',
                              type(publisher).__name__)

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
    receiver needs. The thread starts the publishers before it sends
    anything, so their checks at start never delay the agent either.
    :meth:`close` sends the last signal, then closes the
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
        try:
            self._inner.start()
        except Exception:
            LOG.exception('Publishers failed to start')
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


@dataclasses.dataclass(frozen=True)
class SignalNames:
    """The host and node a signal describes, and where each name is from."""

    host: str
    host_origin: str
    nodename: str
    node_origin: str


def signal_names(conf, hypervisor_hostname=None):
    """The signal's host and node names (:class:`SignalNames`).

    The host is ``[publishers] host`` if set, else nova-compute's own
    ``[DEFAULT] host`` read from ``[host_cpus] nova_config`` and
    ``nova_config_dir`` (:mod:`ufo_agent.hypervisor.nova_host`), which is
    the name nova-scheduler knows the host by. ``hypervisor_hostname`` is
    libvirt's name of the host, which Nova's libvirt driver gives the
    compute node; the node name falls back to the host when it is not
    known either. A ``[publishers] host`` that differs from Nova's host is
    used, with a warning.

    :raises ValueError: naming the file and option, when Nova's
        configuration cannot be read.
    """
    nova = nova_host.read_nova_host(conf.host_cpus.nova_config,
                                    conf.host_cpus.nova_config_dir)
    host, host_origin = nova.name, nova.origin
    if conf.publishers.host:
        host, host_origin = conf.publishers.host, '[publishers] host'
        if nova.files and host != nova.name:
            LOG.warning(
                '[publishers] host is %s but nova-compute\'s host is %s '
                '(%s): nova-scheduler looks host signals up by Nova\'s host '
                'name, so UFOFilter and UFOIdlePoolWeigher will find none '
                'for this host. Unset [publishers] host unless Nova\'s '
                'configuration above is not the one nova-compute uses.',
                host, nova.name, nova.origin)
    if conf.publishers.nodename:
        node, node_origin = conf.publishers.nodename, '[publishers] nodename'
    elif hypervisor_hostname:
        node, node_origin = (hypervisor_hostname,
                             'the host name libvirt reports')
    else:
        node, node_origin = host, 'the host name'
    return SignalNames(host, host_origin, node, node_origin)


def host_and_node(conf, hypervisor_hostname=None):
    """``(host, nodename)`` of :func:`signal_names`."""
    names = signal_names(conf, hypervisor_hostname)
    return names.host, names.nodename


def load(conf, hypervisor_hostname=None):
    """Load the publishers of ``[publishers] enabled``.

    :raises ValueError: naming the option, when an enabled name has no
        plugin or Nova's configuration cannot be read
        (:func:`signal_names`).
    """
    names = conf.publishers.enabled

    def missing(names_missing):
        raise ValueError(
            '[publishers] enabled names unknown publisher(s) %s; installed: '
            '%s' % (', '.join(sorted(names_missing)),
                    ', '.join(sorted(available())) or 'none'))

    if not names:
        return PublisherSet([])
    found = signal_names(conf, hypervisor_hostname)
    LOG.info('Host signals describe host %s (%s), compute node %s (%s)',
             found.host, found.host_origin, found.nodename,
             found.node_origin)
    manager = named.NamedExtensionManager(
        NAMESPACE, names, invoke_on_load=True,
        invoke_args=(conf, found.host, found.nodename), name_order=True,
        on_missing_entrypoints_callback=missing,
        propagate_map_exceptions=True, on_load_failure_callback=_load_failed)
    return PublisherSet(ext.obj for ext in manager.extensions)


def _load_failed(manager, entrypoint, exc):
    raise exc


def available():
    from stevedore import extension
    return extension.ExtensionManager(NAMESPACE).names()
