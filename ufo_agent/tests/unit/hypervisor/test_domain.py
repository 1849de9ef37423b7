"""Parsing Nova's domain XML and deciding what to manage."""

import pytest

from ufo_agent.controller.plan import VmClass
from ufo_agent.hypervisor import domain as dom
from ufo_agent.hypervisor import policy

SHARED = """<domain type='kvm'>
  <name>instance-0000002a</name>
  <uuid>8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d</uuid>
  <metadata>
    <nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.1">
      <nova:package version="34.0.0"/>
      <nova:name>web-1</nova:name>
      <nova:flavor name="lc.large">
        <nova:memory>4096</nova:memory>
        <nova:vcpus>8</nova:vcpus>
        <nova:extraSpecs>
          <nova:extraSpec name="ufo:class">lc</nova:extraSpec>
          <nova:extraSpec name="hw:cpu_policy">shared</nova:extraSpec>
        </nova:extraSpecs>
      </nova:flavor>
      <nova:owner>
        <nova:user uuid="u1">admin</nova:user>
        <nova:project uuid="p1">demo</nova:project>
      </nova:owner>
    </nova:instance>
  </metadata>
  <vcpu placement='static' cpuset='2-15'>8</vcpu>
  <cputune><shares>8192</shares></cputune>
</domain>"""

DEDICATED = """<domain type='kvm'>
  <name>instance-0000002b</name>
  <uuid>aaaa0000-1111-4a5b-9c0d-2e3f4a5b6c7d</uuid>
  <metadata>
    <nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/1.0">
      <nova:name>db</nova:name>
      <nova:flavor name="pinned"><nova:vcpus>2</nova:vcpus></nova:flavor>
    </nova:instance>
  </metadata>
  <vcpu placement='static'>2</vcpu>
  <cputune>
    <vcpupin vcpu='0' cpuset='20'/>
    <vcpupin vcpu='1' cpuset='21'/>
    <emulatorpin cpuset='20-21'/>
  </cputune>
</domain>"""


def test_shared_nova_instance_is_parsed_and_managed():
    domain = dom.parse_domain(SHARED)
    assert domain.uuid == '8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d'
    assert domain.nova.name == 'web-1' and domain.nova.vcpus == 8
    assert domain.nova.extra_specs['ufo:class'] == 'lc'
    assert domain.nova.project == 'p1'
    assert domain.vcpu_cpuset == frozenset(range(2, 16))
    assert not domain.dedicated()
    verdict = policy.decide(domain, managed_cpus=range(2, 16))
    assert verdict.managed and verdict.vm_class == VmClass.LC
    assert verdict.vcpus == 8


def test_dedicated_instance_is_never_managed():
    domain = dom.parse_domain(DEDICATED)
    assert domain.dedicated() and domain.vcpupins == {0: {20}, 1: {21}}
    assert domain.emulatorpin == {20, 21}
    # Old Nova: no extra specs, so the CPU policy is unknown.
    assert domain.nova.extra_specs is None
    verdict = policy.decide(domain, managed_cpus=range(0, 32))
    assert not verdict.managed and 'extraSpecs' in verdict.reason
    # Extra specs that say nothing: the pins alone rule it out.
    said = DEDICATED.replace('<nova:vcpus>2</nova:vcpus>',
                             '<nova:vcpus>2</nova:vcpus><nova:extraSpecs/>')
    verdict = policy.decide(dom.parse_domain(said), range(0, 32),
                            online_cpus=range(32))
    assert not verdict.managed and 'pinned to different' in verdict.reason


def test_live_pins_of_ufo_agent_do_not_make_a_guest_dedicated():
    # After a crash the live XML shows ufo-agent's own one-CPU pins.
    live = SHARED.replace('<cputune><shares>8192</shares></cputune>',
                          "<cputune><vcpupin vcpu='0' cpuset='3'/>"
                          "<vcpupin vcpu='1' cpuset='3'/></cputune>")
    domain = dom.parse_domain(live)
    assert domain.dedicated(trust_pins=True)
    verdict = policy.decide(domain, range(2, 16), persistent=False)
    assert verdict.managed
    flavor = live.replace('name="hw:cpu_policy">shared',
                          'name="hw:cpu_policy">dedicated')
    assert not policy.decide(dom.parse_domain(flavor), range(2, 16),
                             persistent=False).managed


def test_opt_out_hint_and_foreign_domains():
    xml = SHARED.replace('name="ufo:class">lc',
                         'name="ufo:managed">false')
    assert not policy.decide(dom.parse_domain(xml), range(16)).managed
    bad = SHARED.replace('name="ufo:class">lc', 'name="ufo:class">gold')
    verdict = policy.decide(dom.parse_domain(bad), range(16))
    assert verdict.managed and verdict.vm_class == VmClass.AUTO
    assert 'ignored invalid ufo:class' in verdict.reason
    plain = ("<domain><name>x</name><uuid>u-1</uuid>"
             "<vcpu>4</vcpu></domain>")
    assert not policy.decide(dom.parse_domain(plain), range(8)).managed
    assert policy.decide(dom.parse_domain(plain), range(8),
                         manage_non_nova=True, online_cpus=range(8)).managed
    outside = policy.decide(dom.parse_domain(SHARED), range(20, 30))
    assert not outside.managed and 'outside' in outside.reason


@pytest.mark.parametrize('xml,match', [
    ('<domain', 'not XML'),
    ('<vm/>', 'not <domain>'),
    ('<domain><vcpu>2</vcpu></domain>', 'no <uuid>'),
    ('<domain><uuid>u</uuid></domain>', 'no <vcpu>'),
    ('<domain><uuid>u</uuid><vcpu>two</vcpu></domain>', 'invalid <vcpu>'),
    ("<domain><uuid>u</uuid><vcpu cpuset='9-1'>2</vcpu></domain>",
     'vcpu cpuset'),
])
def test_bad_domain_xml_is_refused(xml, match):
    with pytest.raises(dom.DomainXMLError, match=match):
        dom.parse_domain(xml)


def test_the_namespace_tools_write_is_the_one_nova_writes():
    assert dom.NOVA_NS == 'http://openstack.org/xmlns/libvirt/nova/1.1'
    assert dom.NOVA_NS.startswith(dom.NOVA_NS_PREFIX)
    assert dom.NOVA_NS in SHARED


def _with_specs(**specs):
    extra = ''.join('<nova:extraSpec name="%s">%s</nova:extraSpec>'
                    % (k.replace('__', ':'), v) for k, v in specs.items())
    return dom.parse_domain(SHARED.replace('<nova:extraSpecs>',
                                           '<nova:extraSpecs>' + extra))


def test_the_flavor_s_latency_target_reaches_the_verdict():
    verdict = policy.decide(_with_specs(ufo__latency_target_us='2500',
                                        ufo__latency_percentile='99.9'),
                            range(2, 16))
    assert verdict.managed
    assert (verdict.latency_target_us, verdict.latency_percentile) == \
        (2500, 99.9)
    # The percentile defaults to 99; no target, black-box mode.
    verdict = policy.decide(_with_specs(ufo__latency_target_us=' 800 '),
                            range(2, 16))
    assert (verdict.latency_target_us, verdict.latency_percentile) == \
        (800, 99.0)
    verdict = policy.decide(dom.parse_domain(SHARED), range(2, 16))
    assert verdict.latency_target_us is None


@pytest.mark.parametrize('specs,ignored', [
    ({'ufo__latency_target_us': '0'}, 'ufo:latency_target_us'),
    ({'ufo__latency_target_us': '10000001'}, 'ufo:latency_target_us'),
    ({'ufo__latency_target_us': '1.5ms'}, 'ufo:latency_target_us'),
    ({'ufo__latency_target_us': '900',
      'ufo__latency_percentile': '100'}, 'ufo:latency_percentile'),
    ({'ufo__latency_target_us': '900',
      'ufo__latency_percentile': 'p99'}, 'ufo:latency_percentile'),
])
def test_an_invalid_latency_spec_is_ignored_not_fatal(specs, ignored):
    # A flavor made before the validators, or through an old microversion.
    verdict = policy.decide(_with_specs(**specs), range(2, 16))
    assert verdict.managed
    assert 'ignored invalid %s' % ignored in verdict.reason
    if ignored == 'ufo:latency_target_us':
        assert verdict.latency_target_us is None
    else:
        assert verdict.latency_target_us == 900
        assert verdict.latency_percentile == 99.0
