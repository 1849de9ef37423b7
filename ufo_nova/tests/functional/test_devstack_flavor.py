"""The devstack plugin's flavor boots on a cloud no host ever overloaded.

devstack/plugin.sh's ``stack extra`` phase runs in bash (devstack's
functions from ufo_nova/tests/devstack/fake-devstack.sh), which records
the ``openstack`` commands it issues; they are then run, in order, against
the in-process Nova and Placement, and the plugin's flavor ``ufo.small``
(``trait:CUSTOM_UFO_OVERLOADED=forbidden``) is booted before any agent
ran. Placement refuses requests naming an unknown trait, forbidden ones
included, so the flavor boots only if the plugin created the trait.
"""

import argparse
import os
import shlex
import subprocess
import sys

import fixtures

from ufo_nova.tests.functional import base
from ufo_nova.tests.nova_unit import test_devstack as devstack_test

TRAIT = 'CUSTOM_UFO_OVERLOADED'


def _flavor_create_parser():
    parser = argparse.ArgumentParser(prog='openstack flavor create',
                                     exit_on_error=False)
    parser.add_argument('--vcpus', type=int, required=True)
    parser.add_argument('--ram', type=int, required=True)
    parser.add_argument('--disk', type=int, required=True)
    parser.add_argument('--property', action='append', default=[])
    parser.add_argument('name')
    return parser


class TestDevstackFlavorOnFreshCloud(base.UFOSchedulerTestCase):

    def stack_extra(self, services):
        """Run the plugin's ``stack extra``; its ``openstack`` commands."""
        scratch = self.useFixture(fixtures.TempDir()).path
        calls = os.path.join(scratch, 'calls')
        open(calls, 'w').close()
        env = dict(os.environ, UFO_NOVA_DIR=devstack_test.CHECKOUT,
                   SCRATCH=scratch, PYTHON=sys.executable, CALLS=calls,
                   ENABLED_SERVICES=services)
        proc = subprocess.run(
            ['bash', '-c', 'source "$1"\nrun_plugin_phase stack extra',
             'bash', devstack_test.FAKE_DEVSTACK],
            env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(0, proc.returncode, proc.stderr[-3000:])
        with open(calls) as f:
            return [shlex.split(line)[1:] for line in f
                    if line.startswith('openstack ')]

    def run_openstack(self, args):
        """One ``openstack`` command, against the in-process cloud."""
        if args[:2] == ['--os-placement-api-version', '1.6']:
            self.assertEqual(['trait', 'create'], args[2:4], args)
            resp = self.placement.put('/traits/%s' % args[4], None,
                                      version='1.6')
            self.assertIn(resp.status, (201, 204))
        elif args[:2] == ['flavor', 'show']:
            # The fresh cloud has no such flavor (fake-devstack.sh answers
            # so too).
            names = [f['name'] for f in self.admin_api.get_flavors()]
            self.assertNotIn(args[2], names)
        elif args[:2] == ['flavor', 'create']:
            parsed = _flavor_create_parser().parse_args(args[2:])
            specs = dict(p.split('=', 1) for p in parsed.property)
            self._create_flavor(name=parsed.name, vcpu=parsed.vcpus,
                                memory_mb=parsed.ram, disk=parsed.disk,
                                ephemeral=0, extra_spec=specs)
        else:
            self.fail('the plugin runs an openstack command this test '
                      'does not know: %s' % ' '.join(args))

    def test_plugins_flavor_boots_before_any_host_was_overloaded(self):
        commands = self.stack_extra('n-api,n-sch,n-cond,placement-api')
        for args in commands:
            self.run_openstack(args)
        flavors = {f['name']: f['id'] for f in self.admin_api.get_flavors()}
        self.assertIn('ufo.small', flavors)
        self.assertEqual(
            {'trait:%s' % TRAIT: 'forbidden'},
            self.admin_api.get_flavor(flavors['ufo.small'])['extra_specs'])
        # No agent has run: no host was ever overloaded, no signal either
        # (UFOFilter passes unknown hosts, fail-open).
        server = self.boot(flavors['ufo.small'])
        self.assertIn(self.host_of(server), self.hosts)
