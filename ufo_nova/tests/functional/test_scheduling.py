"""Servers avoid overloaded hosts and go where the idle pool can take them.
"""

import time

from ufo_nova import listener
from ufo_nova.tests.functional import base


class TestUFOFilterPlacement(base.UFOSchedulerTestCase):

    def test_overloaded_host_avoided(self):
        # host1 has the most reclaimable cores but is overloaded.
        self.report('host1', idle=0, reclaimable=12, unmet=2)
        self.report('host2', idle=6, reclaimable=6)
        self.report('host3', idle=4, reclaimable=4)
        for _ in range(2):
            server = self.boot()
            self.assertEqual('host2', self.host_of(server))

        # Once host2 and host3 are overloaded too, nothing fits.
        self.report('host2', idle=0, reclaimable=6, unmet=1)
        self.report('host3', idle=0, reclaimable=4, unmet=3)
        server = self.boot(expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])

        # host1 recovers: it gets the next server.
        self.report('host1', idle=8, reclaimable=12)
        self.assertEqual('host1', self.host_of(self.boot()))

    def test_saturated_host_takes_only_what_fits(self):
        # 4 vCPUs x expected_demand_fraction 0.5 = 2 expected cores.
        flavor = self._create_flavor(vcpu=4)
        self.report('host1', idle=1, reclaimable=9)   # saturated, 1 idle
        self.report('host2', idle=2, reclaimable=3)   # saturated, 2 idle
        self.report('host3', idle=0, reclaimable=9, unmet=1)  # overloaded
        server = self.boot(flavor)
        self.assertEqual('host2', self.host_of(server))

        # A 2-vCPU flavor (1 expected core) fits host1, which now wins on
        # reclaimable cores.
        small = self._create_flavor(vcpu=2)
        self.assertEqual('host1', self.host_of(self.boot(small)))

        # Nothing saturated fits 8 vCPUs (4 cores).
        big = self._create_flavor(vcpu=8)
        server = self.boot(big, expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])


class TestBurstOnSaturatedHost(base.UFOSchedulerTestCase):
    hosts = ('host1',)

    def test_vms_sent_since_the_signal_use_its_idle_cores(self):
        # 4 vCPUs x 0.5 = 2 expected cores; host1 reports 2 idle cores.
        flavor = self._create_flavor(vcpu=4)
        self.report('host1', idle=2, reclaimable=2)
        self.assertEqual('host1', self.host_of(self.boot(flavor)))
        # Before the agent measures again, the first VM is expected to take
        # those 2 cores: a second one does not fit.
        server = self.boot(flavor, expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        # The agent measures again (the first VM is running and the idle
        # pool still has 2 cores): the host takes the next one.
        self.report('host1', idle=2, reclaimable=3)
        self.assertEqual('host1', self.host_of(self.boot(flavor)))


class TestUFOIdlePoolWeigher(base.UFOSchedulerTestCase):

    def test_prefers_more_reclaimable_cores(self):
        self.report('host1', idle=3, reclaimable=3)
        self.report('host2', idle=9, reclaimable=9)
        self.report('host3', idle=5, reclaimable=5)
        self.assertEqual('host2', self.host_of(self.boot()))
        # The signal moves: the scheduler follows.
        self.report('host3', idle=12, reclaimable=12)
        self.assertEqual('host3', self.host_of(self.boot()))

    def test_aggregate_multiplier_overrides(self):
        self.report('host1', idle=3, reclaimable=3)
        self.report('host2', idle=9, reclaimable=9)
        self.report('host3', idle=5, reclaimable=5)
        agg = self._create_aggregate('stack-here')
        self.admin_api.post_aggregate_action(
            agg, {'set_metadata': {'metadata': {
                'ufo_idle_pool_weight_multiplier': '-1.0'}}})
        for host in self.hosts:
            self.admin_api.add_host_to_aggregate(agg, host)
        # A negative multiplier stacks: the fewest reclaimable cores wins.
        self.assertEqual('host1', self.host_of(self.boot()))


class TestStaleSignalsFailOpen(base.UFOSchedulerTestCase):
    hosts = ('host1',)
    # The boot after the report must see it fresh (see below).
    ufo_flags = {'signal_max_age': 6.0, 'unknown_host_policy': 'fail-open'}

    def test_stale_overload_is_ignored(self):
        self.report('host1', idle=0, unmet=2)
        server = self.boot(expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        # No keep-alive arrives: the overload signal goes stale and the host
        # counts as unknown, which fail-open passes.
        time.sleep(6.5)
        self.assertEqual('unknown',
                         listener.get_cache().lookup('host1').state)
        self.assertEqual('host1', self.host_of(self.boot()))


class TestStaleSignalsFailClosed(base.UFOSchedulerTestCase):
    hosts = ('host1',)
    # Long enough that the boot after a report is scheduled while the
    # report is fresh on a loaded CI machine (2 s was not).
    ufo_flags = {'signal_max_age': 6.0, 'unknown_host_policy': 'fail-closed'}

    def test_unknown_hosts_rejected(self):
        # No signal at all yet.
        server = self.boot(expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        self.report('host1', idle=8)
        self.assertEqual('host1', self.host_of(self.boot()))
        # The signal goes stale: rejected again.
        time.sleep(6.5)
        server = self.boot(expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
