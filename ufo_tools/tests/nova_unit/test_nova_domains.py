"""The committed Nova 34 domain fixtures are what Nova writes.

Boots every flavor of ``ufo_tools.nova_domains.FLAVORS`` through Nova's
own libvirt driver (in Nova's functional-test harness) and compares the
normalised XML and the index with ``ufo_agent/tests/fixtures/nova34/``.
A difference means Nova changed what it writes: regenerate with
``python -m ufo_tools.nova_domains`` (in this environment), review the
diff, and check ufo-agent's policy still holds for it.
"""

import difflib
import json
import os
import time

import fixtures

from nova.virt.libvirt import driver

from ufo_agent.tests import nova_fixtures
from ufo_tools import nova_domains


class TestNovaDomainFixtures(nova_domains.NovaDomainCapture):

    def _diff(self, expected, got, name):
        return ''.join(difflib.unified_diff(
            expected.splitlines(True), got.splitlines(True),
            'committed/' + name, 'nova/' + name))

    def test_committed_fixtures_are_what_nova_writes(self):
        records = self.capture()
        directory = nova_fixtures.FIXTURE_DIR
        committed = sorted(os.listdir(directory))
        written = sorted([rec['name'] + '.xml' for rec in records] +
                         ['index.json'])
        self.assertEqual(written, committed,
                         'fixture files differ from the generated set')
        for rec in records:
            expected = nova_fixtures.xml(rec['name'])
            if rec['xml'] != expected:
                # The diff first: CI shows a failure's first lines.
                self.fail('Nova now writes:\n' + self._diff(
                    expected, rec['xml'], rec['name'] + '.xml'))
        with open(os.path.join(directory, 'index.json')) as handle:
            self.assertEqual(json.load(handle), nova_domains.index(records))

    def test_a_boot_slower_than_novas_poll_budget_is_captured(self):
        # Nova's helper gives a boot five seconds; CI's two cores, shared
        # with the real-guest suite, can take longer.
        spawn = driver.LibvirtDriver.spawn

        def slow_spawn(*args, **kwargs):
            time.sleep(6)
            return spawn(*args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.spawn', slow_spawn))
        records = self.capture(nova_domains.FLAVORS[:1])
        self.assertEqual(nova_fixtures.xml('shared'), records[0]['xml'])

    def test_normalise_keeps_nova_output_but_run_specific_values(self):
        xml = ('<domain><uuid>U-1</uuid><name>instance-00000003</name>'
               '<nova:creationTime>2026-01-02 03:04:05</nova:creationTime>'
               '<source file="/tmp/xyz/U-1/disk"/>'
               '<x>instance-000000031</x></domain>')
        out = nova_domains.normalise(xml, 'shared', 'U-1',
                                     'instance-00000003', '/tmp/xyz/')
        uuid = nova_domains.fixture_uuid('shared')
        self.assertEqual(
            '<domain><uuid>%s</uuid><name>ufo-nova34-shared</name>'
            '<nova:creationTime>2025-01-01 00:00:00</nova:creationTime>'
            '<source file="/var/lib/nova/instances/%s/disk"/>'
            '<x>instance-000000031</x></domain>\n' % (uuid, uuid), out)
