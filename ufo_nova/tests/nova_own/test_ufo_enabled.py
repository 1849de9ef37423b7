"""The configuration of this suite reaches Nova; the listener follows the
scheduler service.

Loaded by this package's ``load_tests`` into the same suite as Nova's own
tests, so it runs with nova-scheduler.conf as they do.
"""

from nova.conf import scheduler as nova_scheduler_conf
from nova.scheduler import weights
from nova.tests.functional import integrated_helpers

from ufo_nova import filter as ufo_filter
from ufo_nova import listener
from ufo_nova import weigher as ufo_weigher


def _nova_default(name):
    opt, = [o for o in nova_scheduler_conf.filter_scheduler_opts
            if o.name == name]
    return list(opt.default)


def _poller_started(signal_listener):
    # What Nova's RPCPollerCleanupFixture checks at the end of a test.
    return signal_listener._listener.listener._started


class TestUFOEnabledInNova(integrated_helpers._IntegratedTestBase):
    ADMIN_API = True
    microversion = 'latest'

    def test_nova_plugins_kept_and_ufo_added(self):
        host_manager = self.scheduler.manager.host_manager
        self.assertEqual(
            _nova_default('enabled_filters') + ['UFOFilter'],
            [type(f).__name__ for f in host_manager.enabled_filters])
        self.assertIsInstance(host_manager.enabled_filters[-1],
                              ufo_filter.UFOFilter)
        self.assertEqual(
            weights.all_weighers() + [ufo_weigher.UFOIdlePoolWeigher],
            [type(w) for w in host_manager.weighers])

    def _running_listener(self):
        found = listener.current()
        self.assertIsNotNone(found, 'no listener after a boot')
        self.assertTrue(found.started.wait(20), 'listener did not start')
        self.assertTrue(_poller_started(found))
        return found

    def test_listener_follows_scheduler_service(self):
        self.assertIsNone(listener.current())
        # The first scheduling request starts the listener on Nova's
        # notification transport.
        self._create_server(networks='none')
        first = self._running_listener()
        cache = listener.get_cache()

        # oslo.service's in-process restart on SIGHUP: stop, reset, start.
        self.scheduler.stop()
        self.assertIsNone(listener.current())
        self.assertFalse(_poller_started(first))
        self.scheduler.reset()
        self.scheduler.start()
        self.assertIsNone(listener.current())
        # The signals received so far stay until they are stale.
        self.assertIs(cache, listener.get_cache())

        # The next request starts a new one; stopping the service at
        # cleanup stops it (Nova's RPCPollerCleanupFixture checks).
        self._create_server(networks='none')
        second = self._running_listener()
        self.assertIsNot(first, second)

    def test_reset_alone_stops_the_listener(self):
        self._create_server(networks='none')
        first = self._running_listener()
        self.scheduler.reset()
        self.assertIsNone(listener.current())
        self.assertFalse(_poller_started(first))
