"""A real in-process Nova with UFO's scheduler plugins enabled.

API, conductor, scheduler and fake-driver computes from Nova's functional
test helpers, a real Placement (in-process WSGI, sqlite). Host signals come
from the agent's own code (HostSignalTracker and NotificationPublisher) over
an oslo.messaging ``fake:`` notification transport to the scheduler's
listener and cache; the RabbitMQ path is tested in
ufo_nova/tests/messaging.
"""

import os
import sys
import time

from oslo_config import cfg
import oslo_messaging

from nova.tests.functional import integrated_helpers

from ufo_agent import hostsignal
from ufo_agent.publishers import notification
from ufo_nova import coverage
from ufo_nova import listener
from ufo_nova.tests import agentconf

#: The tracker windows of the tests: every state change is immediate.
NO_HYSTERESIS = hostsignal.Windows(
    overloaded_after=0, overloaded_clear_after=0, underloaded_after=0,
    saturated_after=0)


def api_paste_config():
    """api-paste.ini of the installed Nova wheel (not where Nova looks)."""
    for prefix in (sys.prefix, sys.base_prefix, '/usr/local', '/usr'):
        path = os.path.join(prefix, 'etc', 'nova', 'api-paste.ini')
        if os.path.exists(path):
            return path
    raise RuntimeError('api-paste.ini of the nova package not found under %s'
                       % sys.prefix)


def agent_conf(config_file=None, **publishers):
    """A private ufo-agent configuration; see ufo_nova.tests.agentconf."""
    defaults = {'keepalive_interval': 1.0, 'min_interval': 0.0}
    defaults.update(publishers)
    return agentconf.agent_conf(config_file, **defaults)


class FakeAgent:
    """One host's ufo-agent signal path: tracker and publisher."""

    def __init__(self, conf, transport, host):
        self.host = host
        self.tracker = hostsignal.HostSignalTracker(NO_HYSTERESIS)
        self.publisher = notification.NotificationPublisher(
            conf, host, host, transport=transport)
        self.clock = time.time()

    def report(self, idle, reclaimable=None, unmet=0, managed=16):
        """Feed one controller tick and publish; return the signal."""
        self.clock += 1.0
        usage = hostsignal.HostUsage(
            managed_cores=managed, idle_cores=idle,
            reclaimable_cores=idle if reclaimable is None else reclaimable,
            unmet_cores=unmet, timestamp=self.clock)
        signal = self.tracker.update(usage)
        self.publisher.publish(signal)
        return signal


class UFOSchedulerTestCase(integrated_helpers.ProviderUsageBaseTestCase):
    """Nova with UFOFilter and UFOIdlePoolWeigher, three computes."""

    compute_driver = 'fake.MediumFakeDriver'
    hosts = ('host1', 'host2', 'host3')
    # Only UFO's weigher, so that placement follows the signals.
    weight_classes = ['ufo_nova.weigher.UFOIdlePoolWeigher']
    ufo_flags = {}

    def setUp(self):
        # Scheduler flags must be set before the parent starts the
        # scheduler.
        self.flags(api_paste_config=api_paste_config(), group='wsgi')
        self.flags(available_filters=[
            'nova.scheduler.filters.all_filters',
            'ufo_nova.filter.UFOFilter'], group='filter_scheduler')
        enabled = list(cfg.CONF.filter_scheduler.enabled_filters)
        self.flags(enabled_filters=enabled + ['UFOFilter'],
                   group='filter_scheduler')
        self.flags(weight_classes=self.weight_classes,
                   group='filter_scheduler')
        self.flags(start_listener=False, **self.ufo_flags, group='ufo')
        listener.reset()
        coverage.reset()
        super().setUp()
        for host in self.hosts:
            self._start_compute(host)

        self.transport = oslo_messaging.get_notification_transport(
            agent_conf(), url='fake:/')
        self.addCleanup(self.transport.cleanup)
        started = listener.ensure_listening(transport=self.transport)
        self.assertTrue(started.started.wait(20), 'listener did not start')
        # After the listener started: cleanups run last-in first-out, and
        # Nova checks at its own cleanup that no poller thread is left.
        self.addCleanup(listener.reset)
        self.agent_conf = agent_conf()
        self.agents = {host: FakeAgent(self.agent_conf, self.transport, host)
                       for host in self.hosts}

    def report(self, host, idle, reclaimable=None, unmet=0):
        """Publish a signal for host; wait until the scheduler holds it."""
        signal = self.agents[host].report(idle, reclaimable, unmet)
        cache = listener.get_cache()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            got = cache.lookup(host).signal
            # The publisher sends changes only: the cache holds this report
            # once it holds the same figures from this agent.
            if (got is not None and got.source == signal.source
                    and got.same_report(signal)):
                return signal
            time.sleep(0.02)
        self.fail('scheduler cache never received %s of %s'
                  % (signal, host))

    def boot(self, flavor_id=None, expected_state='ACTIVE'):
        server = self._create_server(flavor_id=flavor_id, networks='none',
                                     expected_state=expected_state)
        return server

    def host_of(self, server):
        return server['OS-EXT-SRV-ATTR:host']
