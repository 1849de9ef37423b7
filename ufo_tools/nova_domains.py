"""Domain XML written by Nova's own libvirt driver, for ufo-agent's tests.

Boots one server per flavor of :data:`FLAVORS` on one libvirt compute of
an in-process Nova (Nova's functional-test base
``nova.tests.functional.libvirt.base.ServersTestBase``: real API,
conductor, scheduler, Placement and ``LibvirtDriver``; the fakelibvirt
connection stands in for libvirtd) and captures the XML the driver passes
to ``defineXML``: the persistent definition ufo-agent reads on a real host.

The compute host is :data:`HOST`: two NUMA nodes, ``[compute]
cpu_shared_set`` and ``cpu_dedicated_set`` on both, and CPUs in neither
(reserved for the host).

Needs an environment with ``nova`` (and its functional-test dependencies,
see ``tox -e nova-functional``) installed::

    python -m ufo_tools.nova_domains OUTDIR

writes ``OUTDIR/<fixture>.xml`` (normalised, see :func:`normalise`) and
``OUTDIR/index.json``; OUTDIR defaults to the committed copy,
``ufo_agent/tests/fixtures/nova34/``. The test
``ufo_tools/tests/nova_unit/test_nova_domains.py`` (``tox -e
nova-functional``) regenerates them and fails when Nova writes something
else.
"""

import argparse
import json
import os
import re
import sys
import unittest
import uuid as uuidlib

import fixtures

from nova import context
from nova import objects
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.libvirt import base

from ufo_agent.tests import nova_fixtures
from ufo_nova.tests.functional import base as ufo_base

#: The fake compute host: 2 NUMA nodes of 7 single-thread cores
#: (node 0: CPUs 0-6, node 1: CPUs 7-13). CPUs 0 and 7 are in neither set:
#: reserved for the host. (Nova's fixture reports 16 online CPUs at most.)
HOST = {
    'cpu_nodes': 2,
    'cpu_sockets': 1,
    'cpu_cores': 7,
    'cpu_threads': 1,
    'cpu_shared_set': '1-2,8-9',
    'cpu_dedicated_set': '3-6,10-13',
}

#: (fixture name, flavor name, vCPUs, extra specs), booted in this order
#: (the order decides which host CPUs Nova picks for each guest).
FLAVORS = (
    ('shared', 'ufo.lc', 2, {'ufo:class': 'lc'}),
    ('shared-optout', 'ufo.optout', 2,
     {'hw:cpu_policy': 'shared', 'ufo:managed': 'false'}),
    # The guest that boots an image without the ufo_guest module: for its
    # XML, a shared flavor without extra specs.
    ('shared-plain', 'plain', 2, {}),
    ('shared-quota', 'quota', 2,
     {'quota:cpu_shares': '2048', 'quota:cpu_period': '100000',
      'quota:cpu_quota': '150000'}),
    ('shared-numa', 'numa1', 2, {'hw:numa_nodes': '1'}),
    ('shared-numa2', 'numa2', 2, {'hw:numa_nodes': '2'}),
    ('shared-pagesize', 'small-pages', 2, {'hw:mem_page_size': 'small'}),
    ('dedicated-isolate', 'pinned.isolate', 2,
     {'hw:cpu_policy': 'dedicated',
      'hw:emulator_threads_policy': 'isolate'}),
    ('dedicated', 'pinned', 2, {'hw:cpu_policy': 'dedicated'}),
    ('dedicated-share', 'pinned.share', 2,
     {'hw:cpu_policy': 'dedicated', 'hw:emulator_threads_policy': 'share'}),
    ('mixed', 'mixed', 2,
     {'hw:cpu_policy': 'mixed', 'hw:cpu_dedicated_mask': '^0'}),
)

#: What :func:`normalise` puts in place of per-run values.
INSTANCES_PATH = '/var/lib/nova/instances'
CREATION_TIME = '2025-01-01 00:00:00'
_UUID_NS = uuidlib.UUID('6f1b1f0e-8d2c-4c4e-9a51-0f5a1c0e4b34')


def fixture_uuid(name):
    """The stable uuid a fixture's instance gets after normalisation."""
    return str(uuidlib.uuid5(_UUID_NS, 'ufo-nova34-' + name))


def normalise(xml, name, instance_uuid, instance_name, instances_path):
    """Make one captured XML independent of the run that wrote it.

    The instance uuid, the libvirt domain name (``instance-%08x``, by boot
    order), the instances path (a temporary directory) and the creation
    time are replaced by values derived from the fixture name; the rest is
    Nova's XML as written.
    """
    xml = xml.replace(instance_uuid, fixture_uuid(name))
    xml = re.sub(r'\b%s\b' % re.escape(instance_name),
                 'ufo-nova34-' + name, xml)
    xml = xml.replace(instances_path.rstrip('/'), INSTANCES_PATH)
    xml = re.sub(r'<nova:creationTime>[^<]*</nova:creationTime>',
                 '<nova:creationTime>%s</nova:creationTime>'
                 % CREATION_TIME, xml)
    return xml.rstrip('\n') + '\n'


def index(records):
    """The ``index.json`` content for captured records."""
    return {
        'generator': 'python -m ufo_tools.nova_domains',
        'nova': _nova_version(),
        'host': dict(HOST),
        'fixtures': [
            {'name': rec['name'], 'file': rec['name'] + '.xml',
             'flavor': rec['flavor'], 'vcpus': rec['vcpus'],
             'extra_specs': rec['extra_specs'], 'uuid': fixture_uuid(
                 rec['name'])}
            for rec in records],
    }


def _nova_version():
    from importlib import metadata
    try:
        return metadata.version('nova')
    except metadata.PackageNotFoundError:
        return 'unknown'


def write(directory, records):
    """Write every record's XML and the index into ``directory``."""
    os.makedirs(directory, exist_ok=True)
    for rec in records:
        with open(os.path.join(directory, rec['name'] + '.xml'), 'w') as out:
            out.write(rec['xml'])
    with open(os.path.join(directory, 'index.json'), 'w') as out:
        json.dump(index(records), out, indent=2, sort_keys=True)
        out.write('\n')


class NovaDomainCapture(base.ServersTestBase):
    """One libvirt compute (:data:`HOST`) that records ``defineXML``."""

    ADDITIONAL_FILTERS = ['NUMATopologyFilter']
    microversion = 'latest'
    #: Seconds one boot may take. Nova's helper polls ten times, half a
    #: second apart; CI runs this beside the real-guest suite on two cores.
    boot_timeout = 120

    def _wait_for_state_change(self, server, expected_status,
                               max_retries=None, **kwargs):
        if max_retries is None:
            max_retries = int(self.boot_timeout / 0.5)
        return super()._wait_for_state_change(
            server, expected_status, max_retries, **kwargs)

    def setUp(self):
        # The wheel installs api-paste.ini where Nova does not look.
        self.flags(api_paste_config=ufo_base.api_paste_config(),
                   group='wsgi')
        super().setUp()
        self.instances_path = base.CONF.instances_path
        self.defined = []
        real_define = fakelibvirt.Connection.defineXML

        def define(conn, xml):
            self.defined.append(xml)
            return real_define(conn, xml)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Connection.defineXML', define))
        self.flags(cpu_shared_set=HOST['cpu_shared_set'],
                   cpu_dedicated_set=HOST['cpu_dedicated_set'],
                   group='compute')
        self.flags(vcpu_pin_set=None)
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        self.start_compute(hostname='compute1',
                           host_info=fakelibvirt.HostInfo(
                               cpu_nodes=HOST['cpu_nodes'],
                               cpu_sockets=HOST['cpu_sockets'],
                               cpu_cores=HOST['cpu_cores'],
                               cpu_threads=HOST['cpu_threads']))

    def _persistent_xml(self, server_id):
        """The last definition Nova wrote for a server."""
        marker = '<uuid>%s</uuid>' % server_id
        found = [xml for xml in self.defined if marker in xml]
        self.assertTrue(found, 'Nova defined no domain for %s' % server_id)
        return found[-1]

    def capture(self, flavors=FLAVORS):
        """Boot each flavor (default :data:`FLAVORS`); return the records."""
        records = []
        for name, flavor, vcpus, specs in flavors:
            flavor_id = self._create_flavor(
                id=flavor, name=flavor, vcpu=vcpus, memory_mb=1024, disk=1,
                ephemeral=0, extra_spec=dict(specs))
            server = self._create_server(name='ufo-' + name,
                                         flavor_id=flavor_id,
                                         networks='none')
            xml = self._persistent_xml(server['id'])
            instance = objects.Instance.get_by_uuid(
                context.get_admin_context(), server['id'])
            records.append({
                'name': name, 'flavor': flavor, 'vcpus': vcpus,
                'extra_specs': dict(specs),
                'xml': normalise(xml, name, server['id'], instance.name,
                                 self.instances_path)})
        return records


class _Generate(NovaDomainCapture):
    """The command's one test: capture and write to ``OUTDIR``."""

    outdir = None

    def test_generate(self):
        write(self.outdir, self.capture())


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m ufo_tools.nova_domains',
        description='Write the domain XML that the installed Nova\'s '
                    'libvirt driver generates for UFO\'s test flavors.')
    parser.add_argument('outdir', nargs='?',
                        default=nova_fixtures.FIXTURE_DIR,
                        help='output directory (default: %(default)s)')
    args = parser.parse_args(argv)
    _Generate.outdir = os.path.abspath(args.outdir)
    suite = unittest.TestSuite([_Generate('test_generate')])
    result = unittest.TextTestRunner(stream=sys.stderr, verbosity=1).run(
        suite)
    if not result.wasSuccessful():
        return 1
    print('wrote %d domains and index.json to %s'
          % (len(FLAVORS), args.outdir))
    return 0


if __name__ == '__main__':
    sys.exit(main())
