"""Parsing and policy over the domain XML Nova 34 itself writes.

The fixtures (``ufo_agent/tests/fixtures/nova34``) come from Nova's own
libvirt driver (``python -m ufo_tools.nova_domains``) on a host with two
NUMA nodes: node 0 is CPUs 0-6, node 1 CPUs 7-13; ``cpu_shared_set``
1-2,8-9, ``cpu_dedicated_set`` 3-6,10-13; CPUs 0 and 7 are reserved.
"""

import re
import xml.etree.ElementTree as ET

import pytest

from ufo_agent.controller.plan import VmClass
from ufo_agent import cpuset
from ufo_agent.hypervisor import domain as dom
from ufo_agent.hypervisor import policy
from ufo_agent.tests import nova_fixtures

HOST = nova_fixtures.Host()
NAMES = nova_fixtures.names()


def parse(name):
    return dom.parse_domain(nova_fixtures.xml(name))


def decide(name_or_domain, **kwargs):
    domain = (parse(name_or_domain) if isinstance(name_or_domain, str)
              else name_or_domain)
    args = dict(managed_cpus=HOST.shared, online_cpus=HOST.online,
                numa_of_cpu=HOST.numa_of_cpu)
    args.update(kwargs)
    return policy.decide(domain, **args)


def test_the_fixture_host_is_what_the_tests_assume():
    assert HOST.online == frozenset(range(14))
    assert HOST.node_cpus(0) == frozenset(range(7))
    assert HOST.shared == {1, 2, 8, 9}
    assert HOST.dedicated == {3, 4, 5, 6, 10, 11, 12, 13}
    assert HOST.reserved == {0, 7}
    assert set(NAMES) == {
        'shared', 'shared-optout', 'shared-plain', 'shared-quota',
        'shared-numa', 'shared-numa2', 'shared-pagesize',
        'dedicated-isolate', 'dedicated', 'dedicated-share', 'mixed'}
    for entry in nova_fixtures.index()['fixtures']:
        domain = parse(entry['name'])
        assert domain.nova.package == '34.0.0'
        assert domain.nova.extra_specs == entry['extra_specs']
        assert domain.nova.vcpus == entry['vcpus'] == domain.vcpus


#: fixture -> (managed, words of the reason)
VERDICTS = {
    'shared': (True, 'Nova instance, shared policy'),
    'shared-optout': (False, 'ufo:managed=false'),
    'shared-plain': (True, 'Nova instance, shared policy'),
    'shared-quota': (True, 'Nova instance, shared policy'),
    'shared-numa': (True, 'shared CPUs of NUMA node(s) 0'),
    'shared-numa2': (False, 'pinned to different CPU sets (1-2, 8-9)'),
    'shared-pagesize': (True, 'shared CPUs of NUMA node(s) 1'),
    'dedicated-isolate': (False, 'flavor hw:cpu_policy=dedicated'),
    'dedicated': (False, 'flavor hw:cpu_policy=dedicated'),
    'dedicated-share': (False, 'flavor hw:cpu_policy=dedicated'),
    'mixed': (False, 'flavor hw:cpu_policy=mixed'),
}


@pytest.mark.parametrize('name', NAMES)
def test_which_guests_are_managed_and_why(name):
    managed, words = VERDICTS[name]
    verdict = decide(name)
    assert verdict.managed is managed, verdict.reason
    assert words in verdict.reason
    if not managed:
        assert not verdict.restore_vcpus and not verdict.allowed_cpus


def test_class_hint_and_flavor_vcpus():
    verdict = decide('shared')
    assert verdict.vm_class == VmClass.LC and verdict.vcpus == 2
    assert decide('shared-plain').vm_class == VmClass.AUTO


def _definition(name):
    """Pins straight from the XML, without the parser under test."""
    root = ET.fromstring(nova_fixtures.xml(name))
    vcpu = root.find('vcpu')
    default = cpuset.parse_cpuset(vcpu.get('cpuset', ''))
    tune = root.find('cputune')
    pins = {int(p.get('vcpu')): cpuset.parse_cpuset(p.get('cpuset'))
            for p in (tune.findall('vcpupin') if tune is not None else ())}
    emu = tune.find('emulatorpin') if tune is not None else None
    io = {int(p.get('iothread')): cpuset.parse_cpuset(p.get('cpuset'))
          for p in (tune.findall('iothreadpin') if tune is not None else ())}
    return default, pins, (cpuset.parse_cpuset(emu.get('cpuset'))
                           if emu is not None else None), io, int(vcpu.text)


@pytest.mark.parametrize('name', NAMES)
def test_restore_pins_are_the_definition_per_vcpu(name):
    default, pins, emu, io, count = _definition(name)
    restore = dom.restore_pins(parse(name), HOST.online)
    assert sorted(restore.vcpus) == list(range(count))
    for index in range(count):
        assert restore.vcpus[index] == pins.get(index, default)
    assert restore.emulator == (emu if emu is not None else default)
    # Nova writes <iothreads>1</iothreads>; pinned only with a NUMA
    # topology, else it follows <vcpu cpuset>.
    assert restore.iothreads == {1: io.get(1, default)}
    verdict = decide(name)
    if verdict.managed:
        assert verdict.restore_vcpus == restore.vcpus
        assert verdict.restore_emulator == restore.emulator
        assert verdict.restore_iothreads == restore.iothreads


@pytest.mark.parametrize('name', NAMES)
def test_managed_guests_never_reach_dedicated_or_reserved_cpus(name):
    verdict = decide(name)
    if not verdict.managed:
        return
    touched = set(verdict.allowed_cpus) | set(verdict.restore_emulator)
    for group in (verdict.restore_vcpus, verdict.restore_iothreads):
        for cpus in group.values():
            touched |= cpus
    assert touched <= HOST.shared
    assert not touched & (HOST.dedicated | HOST.reserved)


def test_shared_guests_key_fragments():
    shared = parse('shared')
    assert shared.vcpu_cpuset == HOST.shared
    assert not shared.vcpupins and not shared.emulatorpin
    assert shared.numatune is None and shared.iothreads == 1
    assert decide(shared).allowed_cpus == HOST.shared
    assert parse('shared-plain').nova.extra_specs == {}
    assert parse('shared-plain').nova.image_properties == {
        'hw_architecture': 'x86_64'}
    quota = parse('shared-quota')
    assert quota.cputune == dom.CpuTune(shares=2048, period=100000,
                                        quota=150000)
    assert shared.cputune == dom.CpuTune()


@pytest.mark.parametrize('name,node', [('shared-numa', 0),
                                       ('shared-pagesize', 1)])
def test_shared_numa_guest_is_restored_per_vcpu_and_kept_on_its_node(
        name, node):
    domain = parse(name)
    node_shared = HOST.shared & HOST.node_cpus(node)
    # What Nova writes: no <vcpu cpuset>, each vCPU pinned to the shared
    # CPUs of the host node, memory strictly on that node.
    assert not domain.vcpu_cpuset
    assert domain.vcpupins == {0: node_shared, 1: node_shared}
    assert domain.emulatorpin == node_shared
    assert domain.iothreadpins == {1: node_shared}
    assert domain.numatune == dom.NumaTune(
        'strict', frozenset([node]), 'static',
        {0: dom.MemNode('strict', frozenset([node]))})
    assert domain.numa_cells == {0: frozenset([0, 1])}
    verdict = decide(domain)
    assert verdict.managed
    assert verdict.restore_vcpus == {0: node_shared, 1: node_shared}
    assert verdict.restore_emulator == node_shared
    assert verdict.allowed_cpus == node_shared
    assert dom.numa_cpus(domain, HOST.numa_of_cpu, HOST.online) == \
        HOST.node_cpus(node)


def test_numa_guest_needs_the_host_numa_layout():
    verdict = decide('shared-numa', numa_of_cpu=None)
    assert not verdict.managed
    assert 'host NUMA layout is unknown' in verdict.reason


def test_numa_guest_pinned_to_other_than_its_nodes_shared_cpus():
    # ufo-agent keeps CPU 2 out of the managed set: Nova's pin 1-2 is no
    # longer the managed CPUs of node 0.
    verdict = decide('shared-numa', managed_cpus=HOST.shared - {2})
    assert not verdict.managed
    assert 'not to the managed CPUs 1 of its NUMA node(s) 0' in \
        verdict.reason


def test_numa_allowed_cpus_follow_the_memory_binding():
    domain = parse('shared-numa')
    assert dom.numa_cpus(domain, HOST.numa_of_cpu, HOST.shared) == {1, 2}
    preferred = dom.parse_domain(nova_fixtures.xml('shared-numa').replace(
        'mode="strict"', 'mode="preferred"'))
    assert preferred.numatune.bound_nodes() == frozenset()
    assert dom.numa_cpus(preferred, HOST.numa_of_cpu, HOST.shared) == \
        HOST.shared
    assert dom.numa_cpus(parse('shared'), HOST.numa_of_cpu, {1, 8}) == \
        {1, 8}
    spanning = parse('shared-numa2')
    assert spanning.numatune.bound_nodes() == {0, 1}
    assert spanning.numa_cells == {0: {0}, 1: {1}}


def test_dedicated_and_mixed_fragments():
    dedicated = parse('dedicated')
    assert not dedicated.vcpu_cpuset
    assert all(len(c) == 1 for c in dedicated.vcpupins.values())
    assert set().union(*dedicated.vcpupins.values()) <= HOST.dedicated
    assert dedicated.emulatorpin == set().union(*dedicated.vcpupins.values())
    isolate = parse('dedicated-isolate')
    assert len(isolate.emulatorpin) == 1
    assert isolate.emulatorpin <= HOST.dedicated
    assert not isolate.emulatorpin & set().union(*isolate.vcpupins.values())
    # hw:emulator_threads_policy=share: the emulator runs on the shared
    # (managed) CPUs although the guest is never managed.
    assert parse('dedicated-share').emulatorpin == HOST.shared
    mixed = parse('mixed')
    assert mixed.vcpupins[0] <= HOST.shared and len(mixed.vcpupins[0]) > 1
    assert mixed.vcpupins[1] <= HOST.dedicated
    assert mixed.emulatorpin & HOST.dedicated


@pytest.mark.parametrize('name', NAMES)
def test_old_nova_without_extra_specs_is_hands_off(name):
    old = dom.parse_domain(nova_fixtures.old_nova(nova_fixtures.xml(name)))
    assert old.nova.extra_specs is None and old.nova.package == '31.0.0'
    verdict = decide(old)
    assert not verdict.managed
    assert 'no <nova:extraSpecs> (Nova 31.0.0' in verdict.reason


def test_old_nova_mixed_and_opt_out_are_not_managed_even_if_xml_looks_ok():
    # Nova < 32 dropped the flavor: a mixed guest's pins would be the
    # only evidence, ufo:managed=false would be lost altogether.
    for name in ('mixed', 'shared-optout'):
        old = nova_fixtures.old_nova(nova_fixtures.xml(name))
        assert 'extraSpec' not in old
        assert not decide(dom.parse_domain(old)).managed


def _without_policy_specs(name):
    """The fixture with a flavor that claims nothing about CPU policy."""
    text = nova_fixtures.xml(name)
    text = re.sub(r'\s*<nova:extraSpec name="hw:(cpu_policy|'
                  r'cpu_dedicated_mask|emulator_threads_policy)">[^<]*'
                  r'</nova:extraSpec>', '', text)
    return dom.parse_domain(text)


@pytest.mark.parametrize('name,words', [
    ('dedicated', 'pinned to different CPU sets (11, 12)'),
    ('dedicated-isolate', 'pinned to different CPU sets (5, 6)'),
    ('dedicated-share', 'pinned to different CPU sets (10, 13)'),
    ('mixed', 'pinned to different CPU sets (1-2, 3)'),
])
def test_the_definition_alone_rules_out_dedicated_and_mixed(name, words):
    domain = _without_policy_specs(name)
    assert 'hw:cpu_policy' not in domain.nova.extra_specs
    verdict = decide(domain)
    assert not verdict.managed and words in verdict.reason


def test_single_vcpu_pinned_guest_is_not_taken_for_a_numa_shared_one():
    # One dedicated vCPU: all pins are "the same", but CPU 11 is not the
    # managed CPUs of node 1.
    text = nova_fixtures.xml('dedicated').replace(
        '<vcpu>2</vcpu>', '<vcpu>1</vcpu>').replace(
        '<vcpupin vcpu="1" cpuset="11"/>', '')
    domain = dom.parse_domain(re.sub(
        r'\s*<nova:extraSpec name="hw:cpu_policy">[^<]*</nova:extraSpec>',
        '', text))
    verdict = decide(domain)
    assert not verdict.managed
    assert 'not to the managed CPUs 8-9 of its NUMA node(s) 1' in \
        verdict.reason


def test_image_cpu_policy_counts_too():
    text = nova_fixtures.xml('shared-plain').replace(
        '<nova:property name="hw_architecture">x86_64</nova:property>',
        '<nova:property name="hw_cpu_policy">dedicated</nova:property>')
    verdict = decide(dom.parse_domain(text))
    assert not verdict.managed
    assert verdict.reason == 'image hw_cpu_policy=dedicated'


def test_pins_that_differ_from_the_vcpu_cpuset_are_hands_off():
    text = nova_fixtures.xml('shared').replace(
        '<clock', '<cputune><vcpupin vcpu="1" cpuset="8"/></cputune><clock',
        1)
    verdict = decide(dom.parse_domain(text))
    assert not verdict.managed
    assert verdict.reason == ('vCPU 1 is pinned to 8, not to its <vcpu '
                              'cpuset> 1-2,8-9')
    same = nova_fixtures.xml('shared').replace(
        '<clock', '<cputune><vcpupin vcpu="0" cpuset="1-2,8-9"/>'
                  '<vcpupin vcpu="1" cpuset="1-2,8-9"/></cputune><clock', 1)
    assert decide(dom.parse_domain(same)).managed


def test_cpus_beyond_the_managed_set_are_hands_off():
    verdict = decide('shared', managed_cpus=HOST.shared - {9})
    assert not verdict.managed
    assert verdict.reason == ('its definition lets it run on CPUs 9 outside '
                              'the managed set')


def test_unrestricted_definition_needs_the_online_cpus():
    text = nova_fixtures.xml('shared').replace(
        '<vcpu cpuset="1-2,8-9">2</vcpu>', '<vcpu>2</vcpu>')
    domain = dom.parse_domain(text)
    verdict = decide(domain, online_cpus=None)
    assert not verdict.managed and 'online CPUs are unknown' in verdict.reason
    # It may run anywhere: on this host that includes dedicated CPUs.
    verdict = decide(domain)
    assert not verdict.managed and 'outside the managed set' in \
        verdict.reason
    # A host where every online CPU is managed (the default).
    verdict = decide(domain, managed_cpus=HOST.online)
    assert verdict.managed
    assert verdict.restore_vcpus == {0: HOST.online, 1: HOST.online}
    assert verdict.restore_emulator == HOST.online


def test_live_xml_of_a_transient_domain_ignores_pins():
    # A transient domain's live XML shows ufo-agent's own pins: only
    # <vcpu cpuset> is the definition's.
    text = nova_fixtures.xml('shared').replace(
        '<clock', '<cputune><vcpupin vcpu="0" cpuset="1"/>'
                  '<vcpupin vcpu="1" cpuset="1"/><emulatorpin cpuset="2"/>'
                  '</cputune><clock', 1)
    domain = dom.parse_domain(text)
    assert not decide(domain).managed
    verdict = decide(domain, persistent=False)
    assert verdict.managed
    assert verdict.restore_vcpus == {0: HOST.shared, 1: HOST.shared}
    assert verdict.restore_emulator == HOST.shared


def test_numatune_placement_auto_is_hands_off():
    text = nova_fixtures.xml('shared').replace(
        '<vcpu cpuset="1-2,8-9">2</vcpu>',
        '<vcpu placement="auto">2</vcpu>'
        '<numatune><memory mode="strict" placement="auto"/></numatune>')
    verdict = decide(dom.parse_domain(text))
    assert not verdict.managed and "placement='auto'" in verdict.reason


def test_vcpu_current_and_maximum():
    text = nova_fixtures.xml('shared').replace(
        '<vcpu cpuset="1-2,8-9">2</vcpu>',
        '<vcpu cpuset="1-2,8-9" current="1">2</vcpu>')
    domain = dom.parse_domain(text)
    assert (domain.vcpus, domain.max_vcpus) == (1, 2)
    assert sorted(dom.restore_pins(domain).vcpus) == [0, 1]


@pytest.mark.parametrize('fragment,match', [
    ('<iothreads>x</iothreads>', 'invalid <iothreads>'),
    ('<cputune><iothreadpin cpuset="1"/></cputune>', 'iothreadpin'),
    ('<cputune><shares>lots</shares></cputune>', 'cputune shares'),
    ('<numatune><memnode mode="strict" nodeset="0"/></numatune>',
     'memnode without a valid cellid'),
    ('<numatune><memory nodeset="9-1"/></numatune>', 'numatune nodeset'),
    ('<cpu><numa><cell id="x" cpus="0"/></numa></cpu>', 'NUMA cell'),
])
def test_bad_cpu_elements_are_refused(fragment, match):
    xml = "<domain><uuid>u</uuid><vcpu>2</vcpu>%s</domain>" % fragment
    with pytest.raises(dom.DomainXMLError, match=match):
        dom.parse_domain(xml)


def test_adapt_changes_only_what_a_test_host_needs():
    cpu_map = {cpu: 1 if cpu in HOST.shared else 0 for cpu in HOST.online}
    original = nova_fixtures.xml('shared-numa2')
    text = nova_fixtures.adapt(
        original, cpu_map, uuid='11111111-2222-3333-4444-555555555555',
        name='ufo-test-x', memory_mib=64, kernel='/k', initrd='/i',
        cmdline='console=ttyS0')
    before, after = parse('shared-numa2'), dom.parse_domain(text)
    assert after.uuid == '11111111-2222-3333-4444-555555555555'
    assert after.name == 'ufo-test-x'
    assert after.nova == before.nova
    assert after.vcpupins == {0: {1}, 1: {1}}
    assert after.emulatorpin == {1} and after.iothreadpins == {1: {1}}
    assert after.numatune.nodeset == {0}
    assert {m.nodeset for m in after.numatune.memnodes.values()} == {
        frozenset([0])}
    assert after.numa_cells == before.numa_cells
    assert '<domain type="qemu">' in text and '<disk ' not in text
    assert '<memory>65536</memory>' in text
    assert text.count('memory="32768"') == 2
    assert '<kernel>/k</kernel><initrd>/i</initrd>' in text
    assert '<log file=' not in text and '<serial type="pty">' in text
    assert before.uuid not in text
    shared = dom.parse_domain(nova_fixtures.adapt(
        nova_fixtures.xml('shared'), cpu_map))
    assert shared.vcpu_cpuset == {1} and shared.uuid == parse('shared').uuid
