"""The devstack plugin's configuration, as Nova 34 and ufo-agent read it.

devstack/plugin.sh runs in bash, phase by phase as stack.sh, unstack.sh
and clean.sh run it, against a scratch directory that stands in for /etc,
/opt/stack and /dev/shm, with devstack's ini helpers re-implemented in
ufo_nova/tests/devstack. The nova.conf it leaves is then parsed with
Nova's own option definitions and filter/weigher loaders, and
ufo-agent.conf with the agent's option registration and its resolution of
the managed CPUs.
"""

import configparser
import json
import os
import subprocess
import sys

import fixtures
from keystoneauth1 import loading as ks_loading
from nova.scheduler import filters as nova_filters
from nova.scheduler import weights as nova_weights
from oslo_config import cfg
from oslo_log import log as oslo_log
import oslo_messaging.opts
import testtools
from testtools import content

from ufo_agent.controller import topology
from ufo_agent.hypervisor import managed_cpus
from ufo_agent import publishers
import ufo_nova
from ufo_nova.tests import agentconf

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_DEVSTACK = os.path.join(HERE, os.pardir, 'devstack',
                             'fake-devstack.sh')
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(
    ufo_nova.__file__)))

# lib/nova's NOVA_FILTERS (fake-devstack.sh sets the same).
NOVA_FILTERS = ['ComputeFilter', 'ComputeCapabilitiesFilter',
                'ImagePropertiesFilter', 'ServerGroupAntiAffinityFilter',
                'ServerGroupAffinityFilter', 'SameHostFilter',
                'DifferentHostFilter']
ALL_FILTERS = 'nova.scheduler.filters.all_filters'
ALL_WEIGHERS = 'nova.scheduler.weights.all_weighers'
UFO_FILTER = 'ufo_nova.filter.UFOFilter'
UFO_WEIGHER = 'ufo_nova.weigher.UFOIdlePoolWeigher'
OTHER_FILTER = __name__ + '.OtherPluginFilter'
OTHER_WEIGHER = __name__ + '.OtherPluginWeigher'

# Another plugin's post-config: its filter added the way Blazar's plugin
# adds its own, its weigher appended to the list.
OTHER_PLUGIN = '''
filters=$(iniget "$NOVA_CONF" filter_scheduler enabled_filters)
iniset "$NOVA_CONF" filter_scheduler enabled_filters \
    "$filters,OtherPluginFilter"
iniadd "$NOVA_CONF" filter_scheduler available_filters %s
iniadd "$NOVA_CONF" filter_scheduler available_filters %s
weighers=$(iniget "$NOVA_CONF" filter_scheduler weight_classes)
iniset "$NOVA_CONF" filter_scheduler weight_classes \
    "${weighers:-%s},%s"
''' % (ALL_FILTERS, OTHER_FILTER, ALL_WEIGHERS, OTHER_WEIGHER)


class OtherPluginFilter(nova_filters.BaseHostFilter):
    """Another project's filter, so that Nova's loader can load it."""

    def host_passes(self, host_state, spec_obj):
        return True


class OtherPluginWeigher(nova_weights.BaseHostWeigher):
    """Another project's weigher."""

    def _weigh_object(self, host_state, weight_properties):
        return 0.0


def nova_view(path):
    """What nova-scheduler makes of ``path`` (see nova_scheduler_view)."""
    proc = subprocess.run(
        [sys.executable, '-m', 'ufo_nova.tests.devstack.nova_scheduler_view',
         path], capture_output=True, text=True, timeout=120, cwd=CHECKOUT)
    if proc.returncode:
        raise AssertionError('Nova cannot use %s: %s'
                             % (path, proc.stderr[-3000:]))
    return json.loads(proc.stdout)


def agent_conf(path):
    """``path`` parsed with ufo-agent's options (and its libraries')."""
    conf = cfg.ConfigOpts()
    for name in ('agent', 'channel', 'controller', 'host_cpus', 'publishers',
                 'signal'):
        agentconf.option_module(name).register_opts(conf)
    oslo_log.register_options(conf)
    for group, opts in oslo_messaging.opts.list_opts():
        if group == 'oslo_messaging_notifications':
            conf.register_opts(opts, group=group)
    conf(['--config-file', path], project='ufo-agent',
         default_config_files=[], default_config_dirs=[], use_env=False)
    # What keystoneauth registers when it loads [placement] auth_type.
    conf.register_opts(ks_loading.get_auth_plugin_conf_options(
        conf.placement.auth_type), group='placement')
    return conf


def written_options(path):
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.read(path)
    out = [('DEFAULT', key) for key in parser.defaults()]
    for section in parser.sections():
        out += [(section, key) for key in parser[section]
                if key not in parser.defaults()]
    return out


class DevstackPluginTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.scratch = self.useFixture(fixtures.TempDir()).path
        self.calls = os.path.join(self.scratch, 'calls')
        open(self.calls, 'w').close()
        self.etc_nova = os.path.join(self.scratch, 'etc', 'nova')
        self.agent_conf_path = os.path.join(self.scratch, 'etc', 'ufo',
                                            'ufo-agent.conf')
        # ufo-agent, installed: records how it was called.
        os.mkdir(os.path.join(self.scratch, 'bin'))
        agent = os.path.join(self.scratch, 'bin', 'ufo-agent')
        with open(agent, 'w') as f:
            f.write('#!/bin/sh\necho "ufo-agent $*" >> "$CALLS"\n')
        os.chmod(agent, 0o755)

    def fake_sysfs(self, siblings):
        """A /sys/devices/system/cpu of the given physical cores."""
        root = os.path.join(self.scratch, 'sys-cpu')
        cpus = sorted(cpu for core in siblings for cpu in core)
        for core in siblings:
            for cpu in core:
                top = os.path.join(root, 'cpu%d' % cpu, 'topology')
                os.makedirs(top)
                with open(os.path.join(top, 'thread_siblings_list'),
                          'w') as f:
                    f.write(','.join(str(c) for c in core) + '\n')
        with open(os.path.join(root, 'online'), 'w') as f:
            f.write('0-%d\n' % cpus[-1])
        return root, frozenset(cpus)

    def bash(self, script, services, sysfs=None, **env):
        """Run ``script`` after sourcing fake-devstack.sh; its stdout."""
        full_env = dict(os.environ, UFO_NOVA_DIR=CHECKOUT,
                        SCRATCH=self.scratch, PYTHON=sys.executable,
                        CALLS=self.calls, ENABLED_SERVICES=services, **env)
        if sysfs:
            full_env['UFO_SYSFS_CPU_DIR'] = sysfs
        proc = subprocess.run(
            ['bash', '-c', 'source "$1"\n' + script, 'bash', FAKE_DEVSTACK],
            env=full_env, capture_output=True, text=True, timeout=120)
        self.addDetail('bash-%d' % len(self.getDetails()),
                       content.text_content(
                           proc.stdout + proc.stderr))
        self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
        return proc.stdout

    def stack(self, services, sysfs=None, before='', after='', **env):
        """stack.sh's steps: nova.conf, post-config, nova-cpu.conf, extra."""
        self.bash('''
create_nova_conf
%s
run_plugin_phase stack post-config
%s
if is_service_enabled n-cpu; then start_nova_compute; fi
run_plugin_phase stack extra
''' % (before, after), services, sysfs, **env)

    def calls_made(self):
        with open(self.calls) as f:
            return f.read().splitlines()

    # -- nova-scheduler -----------------------------------------------------
    def assert_scheduler_loads(self, nova, filters, weighers):
        """Nova's loaders find every enabled filter and the weighers."""
        # As nova.scheduler.host_manager.HostManager: an enabled filter
        # must be available.
        available = set(nova['available_filter_classes'])
        self.assertEqual(set(), set(nova['enabled_filters']) - available)
        for name in filters:
            self.assertIn(name, available)
        for name in weighers:
            self.assertIn(name, nova['weigher_classes'])

    def test_all_in_one_node_keeps_nova_defaults_and_adds_ufo(self):
        sysfs, online = self.fake_sysfs([(0,), (1,)])
        self.stack('n-api,n-sch,n-cond,n-cpu,placement-api,rabbit',
                   sysfs)
        nova = nova_view(os.path.join(self.etc_nova, 'nova.conf'))
        self.assertEqual(NOVA_FILTERS + ['UFOFilter'],
                         nova['enabled_filters'])
        self.assertEqual([ALL_FILTERS, UFO_FILTER],
                         nova['available_filters'])
        self.assertEqual([ALL_WEIGHERS, UFO_WEIGHER], nova['weight_classes'])
        self.assertEqual('fail-open', nova['ufo_unknown_host_policy'])
        self.assert_scheduler_loads(
            nova, NOVA_FILTERS + ['UFOFilter'],
            ['nova.scheduler.weights.ram.RAMWeigher',
             'nova.scheduler.weights.cpu.CPUWeigher', UFO_WEIGHER])

        # nova-compute's file: a small node gives guests every CPU.
        cpu = nova_view(os.path.join(self.etc_nova, 'nova-cpu.conf'))
        self.assertEqual(sorted(online), cpu['cpu_shared_set'])
        self.assert_agent_manages(online, online, [(0,), (1,)])
        self.assert_agent_runs_as_its_user('libvirt', 'libvirt-qemu', 'kvm')
        # The trait exists before the flavor that forbids it: Placement
        # refuses requests that name an unknown trait.
        calls = self.calls_made()
        trait = calls.index('openstack --os-placement-api-version 1.6 '
                            'trait create CUSTOM_UFO_OVERLOADED')
        flavor = [i for i, c in enumerate(calls)
                  if c.startswith('openstack flavor create ')]
        self.assertEqual(1, len(flavor))
        self.assertLess(trait, flavor[0])
        self.assertIn('--property trait:CUSTOM_UFO_OVERLOADED=forbidden '
                      'ufo.small', calls[flavor[0]])
        # placement-api's node has osc-placement (lib/placement).
        self.assertFalse([c for c in calls if c.startswith('pip_install')])

    def test_api_node_without_placement_gets_the_trait_command(self):
        self.stack('n-api,n-cond', UFO_CREATE_FLAVOR='False')
        calls = self.calls_made()
        self.assertEqual(
            ['pip_install_gr osc-placement',
             'openstack --os-placement-api-version 1.6 trait create '
             'CUSTOM_UFO_OVERLOADED'],
            [c for c in calls if c.startswith(('pip_install', 'openstack'))])

    def assert_agent_runs_as_its_user(self, libvirt_group, qemu_user,
                                      qemu_group):
        """ufo-agent runs as ufo-agent, a system user set up for it."""
        calls = self.calls_made()
        state = os.path.join(self.scratch, 'opt', 'stack', 'data',
                             'ufo-agent')
        start = calls.index(
            'run_process ufo-agent %s/bin/ufo-agent --config-file %s '
            'ufo-agent ufo-agent' % (self.scratch, self.agent_conf_path))
        # Before it starts: the user, in libvirt's group and QEMU's...
        before = calls[:start]
        [useradd] = [c for c in before if c.startswith('useradd ')]
        self.assertIn('--system', useradd.split())
        self.assertTrue(useradd.endswith(' ufo-agent'), useradd)
        for group in (libvirt_group, qemu_group):
            self.assertIn('add_user_to_group ufo-agent %s' % group, before)
        # ... that owns its state directory ...
        self.assertIn('chown -R ufo-agent:ufo-agent %s' % state, before)
        self.assertEqual(0o700, os.stat(state).st_mode & 0o777)
        # ... and the directory of the host-wide lock, its alone ...
        lock_dir = os.path.join(self.scratch, 'run', 'ufo-agent')
        self.assertIn('chown ufo-agent:ufo-agent %s' % lock_dir, before)
        self.assertEqual(0o700, os.stat(lock_dir).st_mode & 0o777)
        # ... and reads ufo-agent.conf, which others cannot (a password).
        self.assertIn('chgrp ufo-agent %s' % self.agent_conf_path, before)
        self.assertEqual(0o640,
                         os.stat(self.agent_conf_path).st_mode & 0o777)
        # Its pages go to QEMU's user and group, as libvirt runs QEMU.
        conf = agent_conf(self.agent_conf_path)
        self.assertEqual((qemu_user, qemu_group),
                         (conf.channel.qemu_user, conf.channel.qemu_group))

    def test_on_rhel_the_agent_uses_qemus_user_and_group(self):
        sysfs, online = self.fake_sysfs([(0,), (1,)])
        self.stack('n-cpu', sysfs, FAKE_OS='fedora')
        self.assert_agent_runs_as_its_user('libvirtd', 'qemu', 'qemu')
        # devstack's polkit rule admits $STACK_USER by name only; the
        # agent's user gets a rule of its own.
        rule = os.path.join(self.scratch, 'etc', 'polkit-1', 'rules.d',
                            '50-libvirt-ufo-agent.rules')
        with open(rule) as f:
            text = f.read()
        self.assertIn("action.id == 'org.libvirt.unix.manage'", text)
        self.assertIn("subject.user == 'ufo-agent'", text)
        # A second stack.sh: the user is there, not made again.
        self.stack('n-cpu', sysfs, FAKE_OS='fedora')
        self.assertEqual(1, len([c for c in self.calls_made()
                                 if c.startswith('useradd ')]))

    def test_debian_gets_no_polkit_rule(self):
        sysfs, online = self.fake_sysfs([(0,), (1,)])
        self.stack('n-cpu', sysfs)
        self.assertFalse(os.path.exists(
            os.path.join(self.scratch, 'etc', 'polkit-1')))

    def test_scheduler_node_keeps_other_plugins_filters_either_order(self):
        for before, after in ((OTHER_PLUGIN, ''), ('', OTHER_PLUGIN)):
            self.stack('n-api,n-sch,n-cond,placement-api', before=before,
                       after=after)
            nova = nova_view(os.path.join(self.etc_nova, 'nova.conf'))
            enabled = nova['enabled_filters']
            self.assertEqual(
                set(NOVA_FILTERS + ['OtherPluginFilter', 'UFOFilter']),
                set(enabled))
            self.assertEqual(len(set(enabled)), len(enabled))
            self.assertEqual({ALL_FILTERS, OTHER_FILTER, UFO_FILTER},
                             set(nova['available_filters']))
            self.assertIn(UFO_WEIGHER, nova['weight_classes'])
            self.assertIn(ALL_WEIGHERS, nova['weight_classes'])
            if before:
                # Ours came after the other plugin's: both kept.
                self.assertEqual([ALL_WEIGHERS, OTHER_WEIGHER, UFO_WEIGHER],
                                 nova['weight_classes'])
            self.assert_scheduler_loads(
                nova, NOVA_FILTERS + ['OtherPluginFilter', 'UFOFilter'],
                [UFO_WEIGHER, 'nova.scheduler.weights.ram.RAMWeigher'])
            # No compute service here: no agent, no CPU set.
            self.assertIsNone(nova['cpu_shared_set'])
            self.assertFalse(os.path.exists(self.agent_conf_path))

    # -- compute node and ufo-agent -----------------------------------------
    def assert_agent_manages(self, expected, online, siblings):
        conf = agent_conf(self.agent_conf_path)
        # Every option the plugin writes is one the agent reads.
        for section, key in written_options(self.agent_conf_path):
            group = None if section == 'DEFAULT' else section
            try:
                conf._get_opt_info(key, group)
            except cfg.NoSuchOptError:
                self.fail('ufo-agent.conf [%s] %s is not an option of '
                          'ufo-agent' % (section, key))
        self.assertEqual([os.path.join(self.etc_nova, 'nova-cpu.conf')],
                         conf.host_cpus.nova_config)
        self.assertEqual(os.path.join(self.scratch, 'opt', 'stack', 'data',
                                      'ufo-agent'), conf.agent.state_path)
        self.assertIsNone(conf.publishers.nodename)
        # The agent reads Nova's host itself, from nova-cpu.conf.
        self.assertIsNone(conf.publishers.host)
        self.assertEqual(['notification', 'placement'],
                         conf.publishers.enabled)
        self.assertEqual('password', conf.placement.auth_type)
        self.assertEqual('nova', conf.placement.username)
        managed = managed_cpus.resolve(
            online, conf.host_cpus.managed_cpus,
            conf.host_cpus.reserved_cpus, conf.host_cpus.nova_config,
            conf.host_cpus.nova_config_dir)
        self.assertEqual(expected, managed)
        # The agent's start-up check: at least two whole cores.
        cores = topology.HostTopology(siblings, managed=managed)
        self.assertGreaterEqual(len(cores.cores), 2)
        self.assertEqual(frozenset(), cores.unmanaged_partial_cpus)

    def test_compute_node_spares_core_of_cpu0_for_devstack(self):
        siblings = [(0, 4), (1, 5), (2, 6), (3, 7)]
        sysfs, online = self.fake_sysfs(siblings)
        self.stack('n-cpu,rabbit', sysfs)
        cpu = nova_view(os.path.join(self.etc_nova, 'nova-cpu.conf'))
        # No scheduler here: Nova's defaults untouched.
        self.assertEqual([ALL_FILTERS], cpu['available_filters'])
        self.assertEqual([ALL_WEIGHERS], cpu['weight_classes'])
        self.assertEqual([1, 2, 3, 5, 6, 7], cpu['cpu_shared_set'])
        self.assert_agent_manages(frozenset(cpu['cpu_shared_set']), online,
                                  siblings)

    def test_agent_signals_under_the_host_local_conf_sets(self):
        """local.conf's ``host`` is merged after the plugin's post-config.

        [[post-config|$NOVA_CONF]] sets [DEFAULT] host once the plugins'
        post-config phase ran; nova-compute's nova-cpu.conf is copied from
        nova.conf later. The agent names its signals after that host.
        """
        siblings = [(0,), (1,)]
        sysfs, online = self.fake_sysfs(siblings)
        self.stack('n-cpu', sysfs,
                   after='iniset "$NOVA_CONF" DEFAULT host compute-12')
        conf = agent_conf(self.agent_conf_path)
        self.assertEqual(
            ('compute-12', 'compute-12.example.org'),
            publishers.host_and_node(conf, 'compute-12.example.org'))

    def test_cpu_shared_set_of_operator_is_kept(self):
        siblings = [(0,), (1,), (2,), (3,)]
        sysfs, online = self.fake_sysfs(siblings)
        self.stack('n-cpu', sysfs, before='iniset "$NOVA_CONF" compute '
                   'cpu_shared_set 2-3')
        self.assert_agent_manages(frozenset({2, 3}), online, siblings)
        self.stack('n-cpu', sysfs, UFO_CPU_SHARED_SET='1-3')
        self.assert_agent_manages(frozenset({1, 2, 3}), online, siblings)

    def test_unstack_and_clean_remove_state_pages_and_config(self):
        sysfs, online = self.fake_sysfs([(0,), (1,)])
        self.stack('n-cpu', sysfs)
        shm = os.path.join(self.scratch, 'shm')
        os.mkdir(shm)
        # As local.conf's [[post-config|/etc/ufo/ufo-agent.conf]] would.
        self.bash('iniset "$UFO_AGENT_CONF" channel shm_dir %s' % shm,
                  'n-cpu')
        page = 'ufo-0b3c2a5e-8f61-4d2b-9c7e-2f4d6a8b1c3e'
        keep = ['other-0b3c2a5e-8f61-4d2b-9c7e-2f4d6a8b1c3e', 'ufo-notes',
                'pulse-shm-1']
        for name in [page] + keep:
            open(os.path.join(shm, name), 'w').close()
        state = os.path.join(self.scratch, 'opt', 'stack', 'data',
                             'ufo-agent')
        # Made by stack for the agent's user.
        self.assertTrue(os.path.isdir(state))
        open(os.path.join(state, 'models.json'), 'w').close()
        self.bash('run_plugin_phase unstack', 'n-cpu')
        calls = self.calls_made()
        stop = calls.index('stop_process ufo-agent')
        # --restore as the agent's user, as the packaged unit's
        # ExecStopPost.
        restore = calls.index('ufo-agent --config-file %s --restore'
                              % self.agent_conf_path, stop)
        self.assertEqual('sudo -u ufo-agent %s/bin/ufo-agent --config-file '
                         '%s --restore' % (self.scratch,
                                           self.agent_conf_path),
                         calls[restore - 1])
        self.assertTrue(os.path.exists(os.path.join(shm, page)))

        self.bash('run_plugin_phase clean', 'n-cpu')
        self.assertEqual(sorted(keep), sorted(os.listdir(shm)))
        self.assertFalse(os.path.exists(state))
        self.assertFalse(os.path.exists(os.path.dirname(
            self.agent_conf_path)))
