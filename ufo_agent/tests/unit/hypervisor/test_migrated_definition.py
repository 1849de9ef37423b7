"""The definition Nova persists on the destination of a live migration.

Nova 34 (``nova/virt/libvirt/migration.py``) builds it from the source's
live migratable XML: ``<vcpu cpuset>`` is rewritten for the destination's
``cpu_shared_set`` (``_update_cpu_shared_set_xml``), the pins of a NUMA
guest are all rewritten (``_update_numa_xml``), but a guest without a NUMA
topology keeps the source's live ``<vcpupin>`` and ``<emulatorpin>``:
ufo-agent's, numbered for the source. It also keeps the devices attached
live, ufo-agent's channel among them.
"""

from ufo_agent.hypervisor import domain as dom
from ufo_agent.tests import nova_fixtures
from ufo_agent.tests.unit.hypervisor.test_nova34 import decide
from ufo_agent.tests.unit.hypervisor.test_nova34 import HOST

CHANNEL = ("<shmem name='ufo-%s' role='master'><model type='ivshmem-plain'/>"
           "<size unit='M'>1</size><alias name='shmem0'/></shmem>")
# The source's live pins, as ufo-agent left them: CPU 1 for both vCPUs,
# the emulator on 9.
SOURCE_PINS = ('<cputune><vcpupin vcpu="0" cpuset="1"/>'
               '<vcpupin vcpu="1" cpuset="1"/><emulatorpin cpuset="9"/>'
               '<iothreadpin iothread="1" cpuset="9"/></cputune>')


def _migrated(name, pins=SOURCE_PINS, channel=True):
    text = nova_fixtures.xml(name)
    uuid = dom.parse_domain(text).uuid
    if pins:
        text = text.replace('<clock', pins + '<clock', 1)
    if channel:
        text = text.replace('</devices>', CHANNEL % uuid + '</devices>', 1)
    return uuid, dom.parse_domain(text)


def test_the_channel_device_is_parsed():
    uuid, domain = _migrated('shared')
    assert domain.shmem_names == ('ufo-' + uuid,)
    assert dom.parse_domain(nova_fixtures.xml('shared')).shmem_names == ()


def test_pins_carried_with_ufo_agents_channel_are_ignored():
    uuid, domain = _migrated('shared')
    # Without knowing whose they are, such pins rule the guest out.
    assert not decide(domain).managed
    verdict = decide(domain, channel_name='ufo-' + uuid)
    assert verdict.managed
    # Restored to what Nova wrote for this host: <vcpu cpuset>.
    assert verdict.restore_vcpus == {0: HOST.shared, 1: HOST.shared}
    assert verdict.restore_emulator == HOST.shared
    assert verdict.restore_iothreads == {1: HOST.shared}
    assert 'a live migration copied them' in verdict.reason


def test_another_guests_channel_name_does_not_count():
    _, domain = _migrated('shared')
    assert not decide(domain, channel_name='ufo-someone-else').managed


def test_a_channel_without_pins_changes_nothing():
    uuid, domain = _migrated('shared', pins='')
    verdict = decide(domain, channel_name='ufo-' + uuid)
    assert verdict.managed
    assert verdict.reason == 'Nova instance, shared policy'


def test_numa_guests_keep_the_pins_nova_rewrote_for_the_destination():
    uuid, domain = _migrated('shared-numa', pins='')
    node0 = HOST.shared & HOST.node_cpus(0)
    verdict = decide(domain, channel_name='ufo-' + uuid)
    assert verdict.managed
    assert verdict.restore_vcpus == {0: node0, 1: node0}
    assert verdict.restore_emulator == node0


def test_a_live_xml_ignores_pins_as_before():
    uuid, domain = _migrated('shared', channel=False)
    assert decide(domain, persistent=False).managed
