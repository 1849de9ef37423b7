"""Agent publisher to scheduler cache through a real RabbitMQ on loopback.

Runs with native threads (nothing here imports Nova, which would monkey
patch with eventlet); the Nova functional tests run the same listener
under Nova's own concurrency mode.
"""

import os
import time

from oslo_config import cfg
import oslo_messaging
import testtools

from ufo_agent import hostsignal
from ufo_agent.hostsignal import payload as wire
from ufo_agent.publishers import notification
from ufo_nova import cache as signal_cache
from ufo_nova import conf as ufo_conf
from ufo_nova import listener
from ufo_nova.tests import agentconf
from ufo_nova.tests.messaging import rabbitmq

WINDOWS = hostsignal.Windows(overloaded_after=0, overloaded_clear_after=0,
                             underloaded_after=0, saturated_after=0)
RABBIT_OPTS = """
[oslo_messaging_rabbit]
rabbit_retry_interval = 1
rabbit_retry_backoff = 1
rabbit_interval_max = 2
kombu_reconnect_delay = 0.5
"""


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class TestSignalsOverRabbitMQ(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.broker = self.useFixture(rabbitmq.RabbitMQFixture())
        path = os.path.join(self.broker.dir, 'messaging.conf')
        # nova-scheduler's control exchange: Nova sets its default to nova
        # (nova/rpc.py); the agent keeps oslo.messaging's (openstack).
        nova_only = os.path.join(self.broker.dir, 'nova-exchange.conf')
        with open(nova_only, 'w') as f:
            f.write('[DEFAULT]\ncontrol_exchange = nova\n')
        with open(path, 'w') as f:
            f.write(RABBIT_OPTS)
            # nova-scheduler's own notification transport, as in nova.conf.
            f.write('[oslo_messaging_notifications]\ntransport_url = %s\n'
                    % self.broker.url)

        self.sched_conf = cfg.ConfigOpts()
        ufo_conf.register_opts(self.sched_conf)
        self.sched_conf(['--config-file', path, '--config-file', nova_only],
                        project='nova',
                        default_config_files=[], default_config_dirs=[])

        self.agent_conf = agentconf.agent_conf(
            path, keepalive_interval=30.0, notification_retry=2)

    def _transport(self, conf):
        transport = oslo_messaging.get_notification_transport(
            conf, url=self.broker.url)
        self.addCleanup(transport.cleanup)
        return transport

    def _listener(self, pool):
        cache = signal_cache.SignalCache(max_age=300)
        lsn = listener.SignalListener(
            self.sched_conf, cache,
            transport=self._transport(self.sched_conf), pool=pool)
        lsn.start()
        self.assertTrue(lsn.started.wait(60), 'listener did not start')
        self.addCleanup(lsn.stop)
        return cache

    def _publisher(self, clock):
        pub = notification.NotificationPublisher(
            self.agent_conf, 'compute1', 'compute1-node',
            transport=self._transport(self.agent_conf), clock=clock)
        self.addCleanup(pub.close)
        return pub

    def _wait_for(self, cache, predicate, timeout, tick=None):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if tick is not None:
                tick()
            found = cache.lookup('compute1')
            if found.signal is not None and predicate(found):
                return found
            time.sleep(0.25)
        self.fail('no matching signal within %d s; cache has %s'
                  % (timeout, cache.lookup('compute1')))

    def _process_listener(self):
        """The process-wide listener and cache that UFOFilter starts.

        On nova's notification transport, as in production.
        """
        listener.reset()
        self.addCleanup(listener.reset)
        started = listener.ensure_listening(self.sched_conf)
        self.assertIsNotNone(started)
        self.assertTrue(started.started.wait(60), 'listener did not start')
        self.assertEqual(listener.pool_name(self.sched_conf), started.pool)
        return listener.get_cache()

    def test_publish_receive_bad_payloads_and_broker_restart(self):
        # Two scheduler workers: each listens in a pool of its own.
        worker_a = self._process_listener()
        worker_b = self._listener('ufo-test.worker-b')
        clock = FakeClock()
        publisher = self._publisher(clock)
        tracker = hostsignal.HostSignalTracker(WINDOWS)
        t = [0.0]

        def tick(idle, unmet=0):
            t[0] += 1
            return tracker.update(hostsignal.HostUsage(
                managed_cores=32, idle_cores=idle, reclaimable_cores=idle,
                unmet_cores=unmet, timestamp=t[0]))

        first = tick(idle=8)
        self.assertTrue(publisher.publish(first))
        # Both scheduler workers (pools) see the host.
        for cache in (worker_a, worker_b):
            got = self._wait_for(
                cache, lambda f: f.signal.sequence == first.sequence, 30)
            self.assertEqual(hostsignal.UNDERLOADED, got.state)
            self.assertEqual(8, got.signal.idle_cores)

        # Malformed payloads and a future major version are dropped; the
        # listener keeps working.
        raw = oslo_messaging.Notifier(
            self._transport(self.agent_conf), publisher_id='ufo-agent.bad',
            driver='messagingv2', topics=['ufo_notifications'])
        future = wire.HostSignalPayload('compute1', 'compute1-node',
                                        tick(idle=1)).to_dict()
        future['ufo_object.version'] = '2.0'
        raw.info({}, wire.EVENT_TYPE, future)
        raw.info({}, wire.EVENT_TYPE, {'ufo_object.name': 'nonsense'})
        raw.info({}, wire.EVENT_TYPE, 'not even a dict')
        second = tick(idle=3)
        clock.now += 31
        self.assertTrue(publisher.publish(second))
        got = self._wait_for(
            worker_a, lambda f: f.signal.sequence == second.sequence, 30)
        self.assertEqual(3, got.signal.idle_cores)

        # The broker restarts. The host becomes overloaded meanwhile; the
        # publisher's sends (state change, then keep-alives) reach the
        # scheduler once both sides have reconnected.
        self.broker.restart()

        def keep_ticking():
            clock.now += 31
            publisher.publish(tick(idle=0, unmet=2))

        for cache in (worker_a, worker_b):
            got = self._wait_for(
                cache, lambda f: f.state == hostsignal.OVERLOADED, 120,
                tick=keep_ticking)
            self.assertEqual(2, got.signal.unmet_cores)
            self.assertEqual(tracker.source, got.signal.source)
