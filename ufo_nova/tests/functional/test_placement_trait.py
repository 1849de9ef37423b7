"""The agent's placement publisher against Nova's real Placement.

CUSTOM_UFO_OVERLOADED set through ufo_agent.publishers.placement survives
nova-compute's periodic provider updates, a flavor with
trait:CUSTOM_UFO_OVERLOADED=forbidden avoids the host, other traits are
never touched, and 409 generation conflicts are retried. On a fresh cloud,
where no host was ever overloaded, the agent's start creates the trait so
that such a flavor boots.
"""

import os
import time

import fixtures

from nova.tests import fixtures as nova_fixtures

from ufo_agent import hostsignal
from ufo_agent import publishers
from ufo_agent.publishers import placement
from ufo_nova.tests.functional import base

TRAIT = placement.TRAIT


def _signal(state, sequence=1):
    return hostsignal.HostSignal(
        state=state, idle_cores=0, reclaimable_cores=0, managed_cores=16,
        unmet_cores=2 if state == hostsignal.OVERLOADED else 0,
        sequence=sequence, timestamp=1.0, source='test')


class ConflictingClient:
    """A keystoneauth adapter that loses one race.

    Requests pass through, but another client changes the provider's traits
    just before our first trait update, as a concurrent nova-compute would.
    ``statuses`` are those of the updates of the provider's traits.
    """

    def __init__(self, adapter, interfere):
        self._adapter = adapter
        self._interfere = interfere
        self.statuses = []

    def get(self, *args, **kwargs):
        return self._adapter.get(*args, **kwargs)

    def put(self, url, **kwargs):
        provider_traits = url.endswith('/traits')
        if provider_traits and self._interfere is not None:
            interfere, self._interfere = self._interfere, None
            interfere()
        resp = self._adapter.put(url, **kwargs)
        if provider_traits:
            self.statuses.append(resp.status_code)
        return resp


class PlacementPublisherTestCase(base.UFOSchedulerTestCase):
    hosts = ('host1', 'host2')
    # Nova's HostNameWeigher prefers host1; UFO's weigher is left out so
    # that only Placement decides here.
    weight_classes = ['nova.tests.fixtures.nova.HostNameWeigher']

    def setUp(self):
        self.useFixture(nova_fixtures.HostNameWeigherFixture())
        super().setUp()
        # The [placement] section of ufo-agent.conf, as an operator writes
        # it (keystoneauth1 plugin options), pointing at the in-process
        # Placement.
        self.tmp = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(self.tmp, 'ufo-agent.conf')
        with open(path, 'w') as f:
            f.write('[placement]\nauth_type = admin_token\n'
                    'endpoint = %s\ntoken = %s\n'
                    % (self.placement.fixture.endpoint,
                       self.placement.fixture.token))
        self.agent_conf = base.agent_conf(path, enabled=['placement'])
        self.rp_uuid = self._get_provider_uuid_by_host('host1')


class TestOverloadTrait(PlacementPublisherTestCase):

    def _publisher(self, client=None):
        return placement.PlacementTraitPublisher(
            self.agent_conf, 'host1', 'host1', client=client)

    def _traits(self):
        return set(self._get_provider_traits(self.rp_uuid))

    def test_trait_survives_periodics_and_forbidden_flavor_avoids_host(self):
        before = self._traits()
        self.assertNotIn(TRAIT, before)
        publisher = self._publisher()
        self.assertTrue(publisher.publish(_signal(hostsignal.OVERLOADED)))
        self.assertEqual(before | {TRAIT}, self._traits())
        # Repeating the state does not call Placement again.
        self.assertFalse(publisher.publish(_signal(hostsignal.OVERLOADED, 2)))

        # nova-compute's update_available_resource periodic task rewrites
        # the provider tree; our trait stays.
        self._run_periodics()
        self._run_periodics()
        self.assertEqual(before | {TRAIT}, self._traits())

        forbidden = self._create_flavor(
            extra_spec={'trait:%s' % TRAIT: 'forbidden'})
        server = self._create_server(flavor_id=forbidden, networks='none')
        self.assertEqual('host2', self.host_of(server))
        # Flavors without the extra spec still prefer host1.
        plain = self._create_flavor()
        self.assertEqual('host1', self.host_of(self.boot(plain)))

        # Leaving overload clears the trait: host1 is eligible again.
        self.assertTrue(publisher.publish(_signal(hostsignal.SATURATED, 3)))
        self.assertEqual(before, self._traits())
        server = self._create_server(flavor_id=forbidden, networks='none')
        self.assertEqual('host1', self.host_of(server))

    def test_shutdown_clears_the_trait(self):
        publisher = self._publisher()
        publisher.publish(_signal(hostsignal.OVERLOADED))
        self.assertIn(TRAIT, self._traits())
        publisher.close()
        self.assertNotIn(TRAIT, self._traits())

    def test_restore_clears_the_trait_a_dead_agent_left(self):
        # ufo-agent --restore (the unit's ExecStopPost) after an agent died
        # with the host overloaded: a fresh process, the same config.
        self._publisher().publish(_signal(hostsignal.OVERLOADED))
        self.assertIn(TRAIT, self._traits())
        self.agent_conf.set_override('nodename', 'host1', group='publishers')
        self.assertTrue(placement.clear_trait(self.agent_conf))
        self.assertNotIn(TRAIT, self._traits())
        self.assertIn('COMPUTE_NODE', self._traits())
        # Nothing left to clear: still fine, and no other trait touched.
        self.assertTrue(placement.clear_trait(self.agent_conf))

    def test_generation_conflict_is_retried_without_losing_traits(self):
        publisher = self._publisher()
        publisher.publish(_signal(hostsignal.OVERLOADED))

        def other_client_adds_a_trait():
            self.placement.put('/traits/CUSTOM_SOMEONE_ELSE', None,
                               version='1.6')
            current = self.placement.get(
                '/resource_providers/%s/traits' % self.rp_uuid,
                version='1.6').body
            resp = self.placement.put(
                '/resource_providers/%s/traits' % self.rp_uuid,
                {'traits': current['traits'] + ['CUSTOM_SOMEONE_ELSE'],
                 'resource_provider_generation':
                     current['resource_provider_generation']},
                version='1.6')
            self.assertEqual(200, resp.status)

        client = ConflictingClient(placement._client(self.agent_conf),
                                   other_client_adds_a_trait)
        publisher = self._publisher(client)
        self.assertTrue(publisher.publish(_signal(hostsignal.SATURATED)))
        # Our first write lost the race (409), the retry succeeded.
        self.assertEqual([409, 200], client.statuses)
        traits = self._traits()
        self.assertNotIn(TRAIT, traits)
        self.assertIn('CUSTOM_SOMEONE_ELSE', traits)
        self.assertIn('COMPUTE_NODE', traits)


class TestFreshCloud(PlacementPublisherTestCase):
    """A cloud where no host was ever overloaded, as devstack leaves it.

    Placement answers 400 "No such trait(s)" to a request that names an
    unknown trait, forbidden ones included, so the plugin's flavor boots
    nowhere until the trait exists.
    """

    def _trait_exists(self):
        resp = self.placement.get('/traits/%s' % TRAIT, version='1.6')
        self.assertIn(resp.status, (204, 404))
        return resp.status == 204

    def _nova_conf_sets_host(self, host):
        path = os.path.join(self.tmp, 'nova-cpu.conf')
        with open(path, 'w') as f:
            f.write('[DEFAULT]\nhost = %s\n' % host)
        self.agent_conf.set_override('nova_config', [path],
                                     group='host_cpus')

    def _forbidding_flavor(self):
        return self._create_flavor(
            name='ufo.small', extra_spec={'trait:%s' % TRAIT: 'forbidden'})

    def test_agent_start_makes_the_forbidding_flavor_bootable(self):
        flavor = self._forbidding_flavor()
        self.assertFalse(self._trait_exists())
        # Before any agent ran: the failure this guards against.
        server = self._create_server(flavor_id=flavor, networks='none',
                                     expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])

        # ufo-agent starts on host1 as cmd/agent.py builds it: the
        # publishers of [publishers] enabled, named after nova-compute's
        # host (its nova.conf) and libvirt's node name, in their thread.
        self._nova_conf_sets_host('host1')
        outputs = publishers.BackgroundPublisher(
            publishers.load(self.agent_conf, 'host1'))
        self.addCleanup(outputs.close)
        # The publishers start in the background; no signal was sent, the
        # host was never overloaded.
        deadline = time.monotonic() + 10
        while not self._trait_exists() and time.monotonic() < deadline:
            time.sleep(0.05)

        server = self._create_server(flavor_id=flavor, networks='none')
        self.assertEqual('host1', self.host_of(server))
        self.assertNotIn(TRAIT, self._get_provider_traits(self.rp_uuid))
        self.assertIn('Placement knows compute node host1',
                      self.stdlog.logger.output)

    def test_start_names_the_options_for_an_unknown_node(self):
        # libvirt's name of the host is not the compute node's.
        self._nova_conf_sets_host('host1')
        found = publishers.load(self.agent_conf, 'host1.example.org')
        found.start()
        self.assertTrue(self._trait_exists())
        output = self.stdlog.logger.output
        self.assertIn('Placement has no resource provider named '
                      'host1.example.org', output)
        self.assertIn('set [publishers] nodename = host1', output)
        found.close()
