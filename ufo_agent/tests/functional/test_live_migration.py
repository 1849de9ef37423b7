"""Live migration of a managed guest between two libvirt hosts, end to end.

Two libvirtd instances on this machine, each in mount and UTS namespaces
of its own (:mod:`ufo_tools.nshost`), each with its own ufo-agent
managing CPUs 0-1. They place the guest differently: A in small-host mode
(no emulator pool: the lightly loaded guest keeps CPU 0, its emulator
threads the idle CPU 1), B with the default emulator pool on CPU 0 (the
guest gets CPU 1). The migration is driven the way Nova 34 drives it:
peer to peer, live, persisted on the destination and undefined on the
source, with a destination XML built from the source's live migratable
XML whose ``<vcpu cpuset>`` is rewritten for B (what
``nova.virt.libvirt.migration.get_updated_guest_xml`` does for a guest
without a NUMA topology). QEMU migrates over loopback.
"""

import os
import re
import signal
import time

import pytest

from ufo_tools.e2e import AgentProcess
from ufo_tools.e2e import live_pins
from ufo_tools.e2e import nova_guest
from ufo_tools.e2e import vm_status
from ufo_tools import nshost

SMALL_HOST = {'controller__emulator_min_cores': '0',
              'controller__idle_pool_min_cores': '0'}


@pytest.fixture
def hosts(guest_artifacts):
    with nshost.NamespaceHost('ufo-host-a', 49300) as a, \
            nshost.NamespaceHost('ufo-host-b', 49400) as b:
        yield a, b


def _nova_destination_xml(xml, cpuset):
    """Nova's destination XML: the source's, <vcpu cpuset> rewritten."""
    return re.sub(r"(<vcpu\b[^>]*\bcpuset=')[^']*(')",
                  r'\g<1>%s\g<2>' % cpuset, xml, count=1)


def _migrate(dom, dest, cpuset):
    import libvirt
    xml = _nova_destination_xml(
        dom.XMLDesc(libvirt.VIR_DOMAIN_XML_MIGRATABLE), cpuset)
    params = {libvirt.VIR_MIGRATE_PARAM_DEST_XML: xml,
              libvirt.VIR_MIGRATE_PARAM_PERSIST_XML: xml,
              libvirt.VIR_MIGRATE_PARAM_URI: 'tcp://127.0.0.1'}
    flags = (libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER |
             libvirt.VIR_MIGRATE_PERSIST_DEST |
             libvirt.VIR_MIGRATE_UNDEFINE_SOURCE)
    dom.migrateToURI3(dest.uri, params, flags)
    return xml


def _pins(dom):
    vcpus = {frozenset(i for i, on in enumerate(m) if on)
             for m in dom.vcpuPinInfo(1)}
    emulator = frozenset(i for i, on in enumerate(dom.emulatorPinInfo(1))
                         if on)
    return frozenset().union(*vcpus), emulator


def test_live_migration_to_another_ufo_host(hosts, tmp_path):
    import libvirt
    a, b = hosts
    with nova_guest(uri=a.uri, persistent=True, cpuset='0-1',
                    cmdline='ufo.rate=300 ufo.svc_us=500') as g:
        uuid = g.dom.UUIDString()
        page = '/dev/shm/ufo-' + uuid
        (tmp_path / 'a').mkdir()
        (tmp_path / 'b').mkdir()
        agent_a = AgentProcess(tmp_path / 'a', command_prefix=a.command([]),
                               host_cpus__managed_cpus='0-1',
                               **SMALL_HOST).start()
        agent_b = AgentProcess(tmp_path / 'b', command_prefix=b.command([]),
                               host_cpus__managed_cpus='0-1').start()
        try:
            agent_a.wait(lambda s: (vm_status(s, uuid) or {}).get(
                'channel') == 'proven' and
                live_pins(g) == ({frozenset([0])}, frozenset([1])),
                what='managed on A, on CPU 0')
            assert os.path.exists(a.path(page))
            xml = _migrate(g.dom, b, '0-1')
            arrived = time.monotonic()
            # ufo-agent's live pins on A travel in the migratable XML.
            assert "<vcpupin vcpu='0' cpuset='0'/>" in xml
            assert "<emulatorpin cpuset='1'/>" in xml
            conn_b = libvirt.open(b.uri)
            try:
                dom = conn_b.lookupByUUIDString(uuid)
                # B's agent moves it onto its plan within a tick or two.
                while _pins(dom) != (frozenset([1]), frozenset([0])):
                    assert time.monotonic() - arrived < 5, _pins(dom)
                    time.sleep(0.05)
                # The channel goes on: the page came with the memory.
                status = agent_b.wait(
                    lambda s: (vm_status(s, uuid) or {}).get(
                        'channel') == 'proven' and
                    vm_status(s, uuid)['signal'] == 'guest',
                    what='guest mode on B')
                vm = vm_status(status, uuid)
                assert vm['cpus'] == '1'
                assert os.path.exists(b.path(page))
                # A forgot it: no status, no page.
                agent_a.wait(lambda s: vm_status(s, uuid) is None,
                             what='A forgets the guest')
                deadline = time.monotonic() + 10
                while os.path.exists(a.path(page)) and \
                        time.monotonic() < deadline:
                    time.sleep(0.2)
                assert not os.path.exists(a.path(page))
                # B's persistent definition holds A's pins (Nova persists
                # the live XML), yet B restores what Nova wrote for B.
                defined = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
                assert "<vcpupin vcpu='0' cpuset='0'/>" in defined
                assert agent_b.stop(signal.SIGTERM) == 0
                both = frozenset([0, 1])
                assert _pins(dom) == (both, both)
            finally:
                conn_b.close()
        finally:
            agent_a.stop(signal.SIGTERM)
            agent_b.stop(signal.SIGTERM)
