"""Nova 34's own domain definitions on the real libvirtd.

Every fixture of ``ufo_agent/tests/fixtures/nova34`` (written by Nova's
libvirt driver), adapted only where the test host needs it
(:func:`ufo_agent.tests.nova_fixtures.adapt`: TCG, the fake host's CPU and
node numbers, memory, no disk), is defined and started at once. libvirt
then pins each thread as the definition says: that must be exactly
:func:`~ufo_agent.hypervisor.domain.restore_pins` of the definition as
libvirt returns it, and the policy must decide over libvirt's own rendering
of the XML as it does over Nova's.
"""

import uuid as uuidlib

import pytest

from ufo_agent.hypervisor import domain as dom
from ufo_agent.hypervisor import policy
from ufo_agent.tests import nova_fixtures
from ufo_tools import e2e
from ufo_tools import testguest

FAKE = nova_fixtures.Host()

#: On the test host (every fake node is node 0) — shared-numa2's two
#: nodes collapse into one, so its pins become one set and it is managed.
MANAGED = {'shared', 'shared-plain', 'shared-quota', 'shared-numa',
           'shared-numa2', 'shared-pagesize'}


def _cpus(bits):
    return frozenset(cpu for cpu, on in enumerate(bits) if on)


@pytest.fixture(scope='module')
def host():
    online = frozenset(e2e.host_online_cpus())
    assert len(online) >= 2, 'the test host needs 2 online CPUs'
    testguest.start_libvirtd()
    # The fake host's shared CPUs become the highest real CPU, its
    # dedicated and reserved CPUs the lowest: they never meet.
    shared, other = max(online), min(online)
    cpu_map = {cpu: shared if cpu in FAKE.shared else other
               for cpu in FAKE.online}
    return online, frozenset([shared]), cpu_map


@pytest.fixture(scope='module')
def started(host):
    import libvirt
    online, managed, cpu_map = host
    conn = libvirt.open(testguest.LIBVIRT_URI)
    doms = {}
    try:
        for name in nova_fixtures.names():
            xml = nova_fixtures.adapt(
                nova_fixtures.xml(name), cpu_map, uuid=str(uuidlib.uuid4()),
                name=testguest.NAME_PREFIX + 'nova34-' + name,
                memory_mib=64)
            doms[name] = conn.defineXML(xml)
        for d in doms.values():
            d.create()
        yield libvirt, doms
    finally:
        for d in doms.values():
            try:
                d.destroy()
            except libvirt.libvirtError:
                pass
            d.undefine()
        conn.close()


def test_libvirt_starts_every_thread_where_restore_pins_says(host, started):
    libvirt, doms = started
    online, managed, _ = host
    live = libvirt.VIR_DOMAIN_AFFECT_LIVE
    for name, d in doms.items():
        definition = dom.parse_domain(
            d.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))
        want = dom.restore_pins(definition, online)
        got = dom.RestorePins(
            {i: _cpus(m) for i, m in enumerate(d.vcpuPinInfo(live))},
            _cpus(d.emulatorPinInfo(live)),
            {i: _cpus(m) for i, m in d.ioThreadInfo(live)})
        assert got == want, name


def test_policy_over_libvirts_rendering_of_novas_xml(host, started):
    libvirt, doms = started
    online, managed, _ = host
    numa = {cpu: 0 for cpu in online}
    decided = {}
    for name, d in doms.items():
        definition = dom.parse_domain(
            d.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))
        verdict = policy.decide(definition, managed, online_cpus=online,
                                numa_of_cpu=numa)
        decided[name] = verdict.managed
        if verdict.managed:
            assert verdict.allowed_cpus == managed
            assert verdict.restore_emulator <= managed
            assert all(cpus <= managed
                       for cpus in verdict.restore_vcpus.values())
    assert {n for n, m in decided.items() if m} == MANAGED
