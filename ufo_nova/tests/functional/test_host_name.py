"""The agent's signals land under Nova's host name.

nova-scheduler knows a compute node by nova-compute's ``[DEFAULT] host``,
which need not be the machine's hostname. ufo-agent reads it from
nova-compute's configuration files, as nova-compute does (a later file
wins), names its signals after it, and the scheduler then uses them.
"""

import os
import time

import fixtures

from ufo_agent import publishers
from ufo_nova import listener
from ufo_nova.tests.functional import base


class TestAgentUsesNovasHostName(base.UFOSchedulerTestCase):
    # A host without a signal takes no VM: only a signal under the right
    # name lets a boot through.
    ufo_flags = {'unknown_host_policy': 'fail-closed'}

    def _nova_config(self):
        """nova-compute's files on host2's machine, in the order read."""
        tmp = self.useFixture(fixtures.TempDir()).path
        paths = []
        for name, text in (
                ('nova.conf', '[DEFAULT]\nhost = compute-old\n'
                              '[compute]\ncpu_shared_set = 2-7\n'),
                ('nova-cpu.conf', '[DEFAULT]\nhost = host2\n')):
            paths.append(os.path.join(tmp, name))
            with open(paths[-1], 'w') as f:
                f.write(text)
        return paths

    def test_signals_land_under_novas_host_name(self):
        conf = base.agent_conf()
        conf.set_override('nova_config', self._nova_config(),
                          group='host_cpus')
        # libvirt names the machine otherwise; [publishers] host is unset.
        host, _node = publishers.host_and_node(conf, 'machine-7.example.org')
        agent = base.FakeAgent(conf, self.transport, host)
        sent = agent.report(idle=8)

        cache = listener.get_cache()
        deadline = time.monotonic() + 20
        while (not any(cache.lookup(h).signal for h in cache.hosts())
               and time.monotonic() < deadline):
            time.sleep(0.02)
        self.assertEqual(['host2'], cache.hosts())
        self.assertTrue(cache.lookup('host2').signal.same_report(sent))

        # fail-closed: host1 and host3 have no signal and take nothing.
        flavor = self._create_flavor(vcpu=1)
        self.assertEqual('host2', self.host_of(self.boot(flavor)))
        # The scheduler says, at INFO, whom it has signals for.
        self.assertIn('UFO host signals of the 3 hosts considered: 1 fresh, '
                      '0 stale, 2 without any; without any: host1, host3',
                      self.stdlog.logger.output)
