"""Which running domains the libvirt driver adopts, and with what pins."""

import logging

from ufo_agent.driver import base
from ufo_tools.fakes import fakehost
from ufo_tools.fakes.fakehost import nova_xml
from ufo_tools.fakes.fakehost import plain_xml

U1 = '8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d'
U2 = '3b7e0a52-6c1d-4f0e-a9b8-7d6c5b4a3f2e'
U3 = 'c0ffee00-1234-4abc-8def-0123456789ab'


def _skip_logs(caplog, uuid):
    return [r.getMessage() for r in caplog.records
            if r.getMessage().startswith('Not managing domain %s' % uuid)]


def test_shared_nova_instance_is_adopted_from_its_metadata(host, hv):
    xml = nova_xml(U1, server='web-1', vcpus=2, flavor_vcpus=4,
                   cpuset='2-7', specs={'ufo:class': 'lc',
                                        'hw:cpu_policy': 'shared'})
    host.boot(U1, xml, pid=500)
    guests = host.driver().guests()
    every = frozenset(range(2, 8))
    assert guests == [base.Guest(
        U1, 'web-1', 4, 'lc', every, every, False,
        restore_vcpus={0: every, 1: every})]


def test_the_flavor_s_latency_target_comes_with_the_guest(host, hv):
    xml = nova_xml(U1, cpuset='2-7', specs={
        'ufo:latency_target_us': '1500', 'ufo:latency_percentile': '95',
        'hw:cpu_policy': 'shared'})
    host.boot(U1, xml, pid=500)
    [guest] = host.driver().guests()
    assert (guest.latency_target_us, guest.latency_percentile) == (1500, 95)


def test_persistent_definition_decides_policy_and_restore_pins(host, hv):
    # Live XML after a crashed agent: its own one-CPU pins.
    config = nova_xml(U1, cpuset='2-7', emulatorpin='2-3')
    live = nova_xml(U1, cpuset='2-7', vcpupins={0: '4', 1: '4'},
                    emulatorpin='6')
    host.boot(U1, config, pid=500, live_xml=live)
    [guest] = host.driver().guests()
    assert guest.restore_vcpu_cpus == frozenset(range(2, 8))
    assert guest.restore_emulator_cpus == {2, 3}


def test_dedicated_persistent_definition_is_never_adopted(host, hv, caplog):
    config = nova_xml(U1, cpuset=None, vcpupins={0: '4', 1: '5'},
                      emulatorpin='4-5')
    host.boot(U1, config, pid=500)
    caplog.set_level(logging.INFO)
    assert host.driver().guests() == []
    assert _skip_logs(caplog, U1) == [
        'Not managing domain %s (instance-0000002a): its vCPUs are pinned '
        'to different CPU sets (4, 5): a guest pinned per vCPU or spanning '
        'NUMA nodes' % U1]


def test_transient_domain_is_judged_by_its_live_xml(host, hv):
    # One-CPU live pins do not make it dedicated (they may be ours); its
    # live emulator pin may be ours too, so the vCPU set is restored.
    live = nova_xml(U1, cpuset='2-7', vcpupins={0: '4', 1: '4'},
                    emulatorpin='6')
    host.boot(U1, live, pid=500, persistent=False)
    [guest] = host.driver().guests()
    assert guest.restore_vcpu_cpus == frozenset(range(2, 8))
    assert guest.restore_emulator_cpus == frozenset(range(2, 8))


def test_without_a_cpuset_the_online_cpus_are_restored(host, hv, tmp_path):
    fakehost.write_sysfs(tmp_path / 'sys6', '0-5')
    host.boot(U1, nova_xml(U1, cpuset=None), pid=500)
    [guest] = host.driver(sysfs_root=str(tmp_path / 'sys6')).guests()
    assert guest.restore_vcpu_cpus == frozenset(range(6))
    assert guest.restore_emulator_cpus == frozenset(range(6))


def test_skipped_domains_are_logged_once_per_reason(host, hv, caplog):
    caplog.set_level(logging.INFO)
    host.boot(U1, nova_xml(U1, specs={'ufo:managed': 'false'}), pid=500)
    host.boot(U2, plain_xml(U2), pid=600, name='scratch')
    host.boot(U3, nova_xml(U3, name='instance-0000002c', cpuset='12-15'),
              pid=700, name='instance-0000002c')
    driver = host.driver()
    assert driver.guests() == [] and driver.guests() == []
    assert _skip_logs(caplog, U1) == [
        'Not managing domain %s (instance-0000002a): ufo:managed=false' % U1]
    assert _skip_logs(caplog, U2) == [
        'Not managing domain %s (scratch): no Nova metadata' % U2]
    assert _skip_logs(caplog, U3) == [
        'Not managing domain %s (instance-0000002c): its definition lets it '
        'run on CPUs 12-15 outside the managed set' % U3]
    # A new reason is logged again.
    hv.domains[U1].config_xml = nova_xml(U1, specs={'ufo:managed': 'no'})
    driver.guests()
    driver.guests()
    assert len(_skip_logs(caplog, U1)) == 2
    assert _skip_logs(caplog, U1)[1].endswith('ufo:managed=no')


def test_non_nova_domains_are_adopted_when_configured(host, hv):
    host.boot(U2, plain_xml(U2, vcpus=3), pid=600, vcpus=3, name='scratch')
    [guest] = host.driver(manage_non_nova=True).guests()
    assert guest.name == 'scratch' and guest.vcpus == 3
    assert guest.vm_class == 'auto'
    assert guest.restore_vcpu_cpus == frozenset(range(8))


def test_a_domain_without_pid_file_is_tried_again(host, hv, caplog):
    host.boot(U1, nova_xml(U1), pid=500)
    (host.run / 'instance-0000002a.pid').unlink()
    driver = host.driver()
    assert driver.guests() == []
    assert any('no pid file for instance-0000002a' in r.getMessage()
               for r in caplog.records if r.levelno == logging.WARNING)
    (host.run / 'instance-0000002a.pid').write_text('500\n')
    assert [g.uuid for g in driver.guests()] == [U1]


def test_unreadable_domains_do_not_hide_the_others(host, hv, caplog):
    host.boot(U1, nova_xml(U1), pid=500)
    host.boot(U2, '<domain', pid=600, name='instance-0000002b',
              live_xml='<domain')
    gone = host.boot(U3, nova_xml(U3, name='instance-0000002c'), pid=700,
                     name='instance-0000002c')
    gone.fail['isPersistent'] = hv.libvirtError('Domain not found', 42)
    assert [g.uuid for g in host.driver().guests()] == [U1]
    warned = ' '.join(r.getMessage() for r in caplog.records
                      if r.levelno == logging.WARNING)
    assert 'Not managing domain %s: not XML' % U2 in warned
    assert 'persistence of %s: Domain not found' % U3 in warned


def test_a_running_guest_is_adopted_once(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver()
    driver.guests()
    dom.config_xml = nova_xml(U1, server='renamed')
    [guest] = driver.guests()
    assert guest.name == 'web-1'        # same QEMU process: kept


def test_hostname_is_libvirts_as_nova_reads_it(host, hv):
    hv.hostname = 'compute-7.rack2.example.org'
    assert host.driver().hostname() == 'compute-7.rack2.example.org'


def test_host_cpus_are_read_once_a_poll(host, hv, monkeypatch):
    from ufo_agent.hypervisor import sysfs
    reads = []
    real = sysfs.host_cpus

    def counting(root):
        reads.append(root)
        return real(root)

    monkeypatch.setattr(sysfs, 'host_cpus', counting)
    host.boot(U1, nova_xml(U1, cpuset=None), pid=500)
    host.boot(U2, nova_xml(U2, name='instance-0000002b', cpuset=None),
              pid=600, name='instance-0000002b')
    driver = host.driver()
    assert len(driver.guests()) == 2
    assert len(reads) == 1
    # The next poll reads them again: a guest adopted then sees CPUs
    # taken offline meanwhile.
    (host.sysfs / 'online').write_text('0-5\n')
    host.boot(U3, nova_xml(U3, name='instance-0000002c', cpuset=None),
              pid=700, name='instance-0000002c')
    guests = {g.uuid: g for g in driver.guests()}
    assert len(reads) == 2
    assert guests[U3].restore_vcpu_cpus == frozenset(range(6))
