"""UFOFilter and UFOIdlePoolWeigher on Nova HostState and RequestSpec."""

from nova import objects
from nova.scheduler import weights
from nova import test
from nova.tests.unit.scheduler import fakes

from ufo_agent import hostsignal
from ufo_agent.hostsignal import payload as wire
from ufo_nova import filter as ufo_filter
from ufo_nova import listener
from ufo_nova import weigher as ufo_weigher

INSTANCE = '8a7d6f3e-0000-4000-8000-000000000001'


class Base(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.flags(start_listener=False, group='ufo')
        listener.reset()
        self.addCleanup(listener.reset)
        self.seq = 0

    def signal(self, host, state, idle=0, reclaimable=0, unmet=0):
        self.seq += 1
        listener.get_cache().update(wire.HostSignalPayload(
            host, host, hostsignal.HostSignal(
                state=state, idle_cores=idle, reclaimable_cores=reclaimable,
                managed_cores=32, unmet_cores=unmet, sequence=self.seq,
                timestamp=0.0, source='test')))

    def host(self, name, instances=None, aggregates=None):
        state = fakes.FakeHostState(name, name, {}, instances=instances)
        state.aggregates = aggregates or []
        return state

    def spec(self, vcpus=4, rebuild=False):
        hints = {'_nova_check_type': ['rebuild']} if rebuild else {}
        return objects.RequestSpec(
            flavor=objects.Flavor(vcpus=vcpus, memory_mb=512, root_gb=1,
                                  ephemeral_gb=0, swap=0, extra_specs={}),
            instance_uuid=INSTANCE, scheduler_hints=hints)


class TestUFOFilter(Base):

    def setUp(self):
        super().setUp()
        self.filt = ufo_filter.UFOFilter()

    def passing(self, hosts, spec):
        return [h.host for h in self.filt.filter_all(hosts, spec)]

    def test_states(self):
        self.signal('over', hostsignal.OVERLOADED, idle=9, unmet=1)
        self.signal('under', hostsignal.UNDERLOADED, idle=3)
        self.signal('sat-fit', hostsignal.SATURATED, idle=2)
        self.signal('sat-full', hostsignal.SATURATED, idle=1)
        hosts = [self.host(n) for n in
                 ('over', 'under', 'sat-fit', 'sat-full', 'unknown')]
        # 4 vCPUs x 0.5 = 2 cores; unknown passes (fail-open default).
        self.assertEqual(['under', 'sat-fit', 'unknown'],
                         self.passing(hosts, self.spec(4)))
        self.assertTrue(self.filt.host_passes(hosts[1], self.spec(4)))
        self.assertFalse(self.filt.host_passes(hosts[0], self.spec(4)))

    def test_fraction_and_fail_closed(self):
        self.flags(expected_demand_fraction=1.0,
                   unknown_host_policy='fail-closed', group='ufo')
        self.signal('sat', hostsignal.SATURATED, idle=2)
        hosts = [self.host('sat'), self.host('unknown')]
        self.assertEqual(['sat'], self.passing(hosts, self.spec(2)))
        self.assertEqual([], self.passing(hosts, self.spec(3)))

    def test_rebuild_is_not_filtered(self):
        self.signal('over', hostsignal.OVERLOADED, unmet=1)
        hosts = [self.host('over')]
        self.assertEqual(['over'],
                         self.passing(hosts, self.spec(rebuild=True)))
        self.assertEqual([], self.passing(hosts, self.spec()))

    def test_instance_already_on_host(self):
        inst = objects.Instance(uuid=INSTANCE)
        self.signal('here', hostsignal.SATURATED, idle=0)
        self.signal('there', hostsignal.SATURATED, idle=0)
        hosts = [self.host('here', instances=[inst]), self.host('there')]
        self.assertEqual(['here'], self.passing(hosts, self.spec(8)))
        self.signal('here', hostsignal.OVERLOADED, unmet=1)
        self.assertEqual([], self.passing(hosts, self.spec(8)))

    def test_vcpus_sent_since_the_signal_count_against_idle_cores(self):
        self.signal('sat', hostsignal.SATURATED, idle=2)
        host = self.host('sat')
        host.vcpus_used = 10
        # 4 vCPUs x 0.5 = 2 cores: fits the 2 idle cores.
        self.assertEqual(['sat'], self.passing([host], self.spec(4)))
        # The scheduler sent a 4-vCPU VM there (Nova's HostState counts
        # it); the signal has not changed: no idle core is left for it.
        host.vcpus_used += 4
        self.assertEqual([], self.passing([host], self.spec(4)))
        self.assertEqual([], self.passing([host], self.spec(1)))
        # A new signal is measured after that VM: judged afresh.
        self.signal('sat', hostsignal.SATURATED, idle=2)
        self.assertEqual(['sat'], self.passing([host], self.spec(4)))


class TestUFOIdlePoolWeigher(Base):

    def weigh(self, hosts):
        handler = weights.HostWeightHandler()
        weighers = handler.get_matching_classes(
            ['ufo_nova.weigher.UFOIdlePoolWeigher'])
        return handler.get_weighed_objects(
            [w() for w in weighers], hosts, objects.RequestSpec())

    def test_prefers_more_reclaimable(self):
        self.signal('a', hostsignal.SATURATED, reclaimable=2)
        self.signal('b', hostsignal.UNDERLOADED, idle=4, reclaimable=10)
        self.signal('c', hostsignal.OVERLOADED, reclaimable=5, unmet=1)
        result = self.weigh([self.host(n) for n in ('a', 'b', 'c', 'x')])
        self.assertEqual(['b', 'c', 'a', 'x'], [w.obj.host for w in result])
        self.assertEqual(1.0, result[0].weight)
        self.assertEqual(0.0, result[-1].weight)  # unknown

    def test_multiplier_option(self):
        self.flags(idle_pool_weight_multiplier=-2.0, group='ufo')
        self.signal('a', hostsignal.SATURATED, reclaimable=2)
        self.signal('b', hostsignal.SATURATED, reclaimable=10)
        result = self.weigh([self.host('a'), self.host('b')])
        self.assertEqual('a', result[0].obj.host)
        self.assertEqual(-2.0, result[-1].weight)

    def test_aggregate_override(self):
        self.signal('a', hostsignal.SATURATED, reclaimable=2)
        self.signal('b', hostsignal.SATURATED, reclaimable=10)
        agg = objects.Aggregate(id=1, name='stack', hosts=['b'], metadata={
            ufo_weigher.AGGREGATE_KEY: '-1.0'})
        result = self.weigh([self.host('a'),
                             self.host('b', aggregates=[agg])])
        self.assertEqual('a', result[0].obj.host)
        self.assertEqual(-1.0, result[-1].weight)
        # Invalid metadata falls back to the option, as Nova's weighers do.
        agg.metadata = {ufo_weigher.AGGREGATE_KEY: 'lots'}
        result = self.weigh([self.host('a'),
                             self.host('b', aggregates=[agg])])
        self.assertEqual('b', result[0].obj.host)
