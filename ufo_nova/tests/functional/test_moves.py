"""What UFOFilter does on rebuild, resize and live migration."""

from nova.tests import fixtures as nova_fixtures

from ufo_nova.tests.functional import base


class TestMoves(base.UFOSchedulerTestCase):

    def _server_on_host1(self):
        self.report('host1', idle=10, reclaimable=10)
        self.report('host2', idle=0, reclaimable=0, unmet=1)
        self.report('host3', idle=0, reclaimable=0, unmet=1)
        server = self.boot()
        self.assertEqual('host1', self.host_of(server))
        return server

    def test_rebuild_on_overloaded_host_is_not_filtered(self):
        server = self._server_on_host1()
        # host1 becomes overloaded: a rebuild keeps the instance where it
        # is and adds no demand, so UFOFilter does not run for it.
        self.report('host1', idle=0, reclaimable=10, unmet=2)
        server = self._rebuild_server(
            server, nova_fixtures.GlanceFixture.image2['id'])
        self.assertEqual('host1', self.host_of(server))

    def test_resize_avoids_overloaded_destination(self):
        server = self._server_on_host1()
        # host2 has more reclaimable cores but is overloaded.
        self.report('host2', idle=0, reclaimable=12, unmet=1)
        self.report('host3', idle=6, reclaimable=6)
        flavor = self._create_flavor(vcpu=4)
        server = self._resize_server(server, flavor)
        self.assertEqual('host3', self.host_of(server))
        self._confirm_resize(server)

    def test_resize_fails_when_every_destination_is_overloaded(self):
        server = self._server_on_host1()
        self.report('host2', idle=0, reclaimable=12, unmet=1)
        flavor = self._create_flavor(vcpu=4)
        self.api.post_server_action(
            server['id'], {'resize': {'flavorRef': flavor}})
        self._wait_for_migration_status(server, ['error'])
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual('host1', self.host_of(server))

    def test_live_migration_avoids_overloaded_hosts(self):
        server = self._server_on_host1()
        self.report('host2', idle=0, reclaimable=12, unmet=1)
        self.report('host3', idle=4, reclaimable=4)
        # Asking for the overloaded host (not forced) is refused by the
        # scheduler; the server stays where it was.
        server = self._live_migrate(server, 'error', host='host2')
        self.assertEqual('host1', self.host_of(server))
        # Left to the scheduler, it goes to the host that can take it.
        server = self._live_migrate(server)
        self.assertEqual('host3', self.host_of(server))


class TestResizeToSameHost(base.UFOSchedulerTestCase):
    hosts = ('host1', 'host2')

    def setUp(self):
        self.flags(allow_resize_to_same_host=True)
        super().setUp()

    def test_instance_already_on_saturated_host_may_grow_in_place(self):
        self.report('host1', idle=8, reclaimable=8)
        self.report('host2', idle=0, reclaimable=0, unmet=1)
        server = self.boot()
        self.assertEqual('host1', self.host_of(server))
        # host1 is now saturated with no idle core: a new VM would not fit,
        # but the instance already runs there, so resizing in place passes.
        self.report('host1', idle=0, reclaimable=1)
        flavor = self._create_flavor(vcpu=4)
        self.assertEqual('ERROR', self.boot(
            flavor, expected_state='ERROR')['status'])
        server = self._resize_server(server, flavor)
        self.assertEqual('host1', self.host_of(server))
        # Overloaded, even the resize in place is refused.
        server = self._confirm_resize(server)
        self.report('host1', idle=0, reclaimable=1, unmet=1)
        bigger = self._create_flavor(vcpu=6)
        self.api.post_server_action(
            server['id'], {'resize': {'flavorRef': bigger}})
        self._wait_for_migration_status(server, ['error'])
        self.assertEqual('host1', self.host_of(
            self._wait_for_state_change(server, 'ACTIVE')))
