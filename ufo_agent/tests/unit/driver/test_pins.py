"""Pinning, reading pins back and releasing guests, over a fake libvirt."""

import logging
import os

import pytest

from ufo_agent.channel import host_channel
from ufo_agent import cpuset
from ufo_agent.driver import base
from ufo_tools.fakes import fakehost
from ufo_tools.fakes.fakehost import nova_xml
from ufo_tools.fakes import fakelibvirt as lv

U1 = '8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d'
LIVE = lv.VIR_DOMAIN_AFFECT_LIVE


def _bits(width, cpus):
    return tuple(cpu in cpus for cpu in range(width))


def _calls(hv, method):
    return [call[2:] for call in hv.calls if call[1] == method]


@pytest.fixture
def guest(host, hv):
    """A managed 2-vCPU Nova guest with one I/O thread."""
    dom = host.boot(U1, nova_xml(U1, cpuset='2-7'), pid=500, iothreads=[1])
    driver = host.driver()
    driver.guests()
    return driver, dom


@pytest.mark.parametrize('managed,cpus,cpu_count,width', [
    (range(8), {3}, 2, 8),          # the managed set
    (range(8), {12}, 2, 13),        # the highest CPU pinned to
    (range(16), {1}, 4, 16),
    ({0, 1}, {1}, 6, 6),            # every CPU of the host
    ({0, 1}, set(), None, 2),       # os.cpu_count() may say None
])
def test_cpu_map_is_wide_enough_for_every_cpu(host, hv, monkeypatch,
                                              managed, cpus, cpu_count,
                                              width):
    monkeypatch.setattr(os, 'cpu_count', lambda: cpu_count)
    # A guest of the managed CPUs only: one that may float over the
    # others is left alone.
    host.boot(U1, nova_xml(U1, cpuset=cpuset.format_cpuset(managed)),
              pid=500)
    driver = host.driver(managed_cpus=frozenset(managed))
    driver.guests()
    driver.pin_vcpus(U1, frozenset(cpus))
    assert _calls(hv, 'pinVcpuFlags') == [
        (0, _bits(width, cpus), LIVE), (1, _bits(width, cpus), LIVE)]


def test_the_host_cpu_count_is_read_once_a_poll(host, hv, monkeypatch):
    width, reads = [8], []

    def cpu_count():
        reads.append(width[0])
        return width[0]
    monkeypatch.setattr(os, 'cpu_count', cpu_count)
    host.boot(U1, nova_xml(U1, cpuset='0-3'), pid=500)
    driver = host.driver(managed_cpus=frozenset(range(4)))
    driver.guests()
    del reads[:]
    for _ in range(3):
        driver.pin_vcpus(U1, frozenset({1}))
    # Read for every pin before (it reads sysfs).
    assert reads == [8]
    # A CPU brought online: the maps of the next poll's pins cover it.
    width[0] = 12
    driver.guests()
    driver.pin_vcpus(U1, frozenset({1}))
    assert _calls(hv, 'pinVcpuFlags')[-1] == (1, _bits(12, {1}), LIVE)


def test_every_vcpu_thread_is_pinned_live(guest, hv, monkeypatch):
    monkeypatch.setattr(os, 'cpu_count', lambda: 8)
    driver, dom = guest
    driver.pin_vcpus(U1, frozenset({3, 5}))
    assert _calls(hv, 'pinVcpuFlags') == [
        (0, _bits(8, {3, 5}), LIVE), (1, _bits(8, {3, 5}), LIVE)]


def test_every_vcpu_of_the_definition_is_pinned_without_vcpu_threads(
        host, hv, monkeypatch):
    monkeypatch.setattr(os, 'cpu_count', lambda: 8)
    host.boot(U1, nova_xml(U1, vcpus=3), pid=500, vcpus=0)
    driver = host.driver()
    driver.guests()
    driver.pin_vcpus(U1, frozenset({2}))
    assert [call[0] for call in _calls(hv, 'pinVcpuFlags')] == [0, 1, 2]


def test_emulator_io_and_vhost_threads_are_pinned(host, hv, monkeypatch,
                                                  caplog):
    monkeypatch.setattr(os, 'cpu_count', lambda: 8)
    affinity = []

    def sched_setaffinity(pid, cpus):
        if pid == 902:
            raise PermissionError(1, 'Operation not permitted')
        affinity.append((pid, frozenset(cpus)))

    monkeypatch.setattr(os, 'sched_setaffinity', sched_setaffinity)
    host.boot(U1, nova_xml(U1), pid=500, iothreads=[1, 2])
    # A vhost worker of QEMU's own (503) and two kernel threads.
    fakehost.write_qemu(host.proc, 500, 2, others=('vhost-500',),
                        vhost=(901, 902))
    driver = host.driver()
    driver.guests()
    driver.pin_emulator(U1, frozenset({0, 1}))
    assert _calls(hv, 'pinEmulator') == [(_bits(8, {0, 1}), LIVE)]
    assert _calls(hv, 'pinIOThread') == [(1, _bits(8, {0, 1}), LIVE),
                                         (2, _bits(8, {0, 1}), LIVE)]
    assert affinity == [(503, {0, 1}), (901, {0, 1})]
    assert any('Cannot pin vhost thread 902' in r.getMessage()
               for r in caplog.records if r.levelno == logging.WARNING)
    # Unprivileged, that is no news the next time: logged once.
    caplog.clear()
    driver.pin_emulator(U1, frozenset({2, 3}))
    assert affinity[-2:] == [(503, {2, 3}), (901, {2, 3})]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_io_thread_info_errors_do_not_stop_the_emulator_pin(guest, hv):
    driver, dom = guest
    dom.fail['ioThreadInfo'] = lv.libvirtError('unsupported', 3)
    driver.pin_emulator(U1, frozenset({0}))
    assert len(_calls(hv, 'pinEmulator')) == 1
    assert _calls(hv, 'pinIOThread') == []


def test_pin_errors_name_the_guest_and_the_vcpu(guest, hv):
    driver, dom = guest
    dom.fail['pinVcpuFlags'] = lv.libvirtError('cgroup: Invalid argument')
    with pytest.raises(base.DriverError,
                       match='pin vCPU 0 of %s: cgroup' % U1):
        driver.pin_vcpus(U1, frozenset({2}))


def test_read_pins_returns_sets(guest, hv):
    driver, dom = guest
    driver.pin_vcpus(U1, frozenset({2, 3}))
    driver.pin_emulator(U1, frozenset({0}))
    assert driver.read_pins(U1) == ({frozenset({2, 3})}, frozenset({0}))
    dom.vcpu_pins[1] = _bits(8, {4})
    assert driver.read_pins(U1) == ({frozenset({2, 3}), frozenset({4})},
                                    frozenset({0}))


def test_operations_on_unmanaged_guests_are_errors(host, hv):
    driver = host.driver()
    for call in (lambda: driver.pin_vcpus(U1, {1}),
                 lambda: driver.pin_emulator(U1, {1}),
                 lambda: driver.read_pins(U1),
                 lambda: driver.observe(U1),
                 lambda: driver.set_vcpu_target(U1, 1),
                 lambda: driver.release(U1)):
        with pytest.raises(base.DriverError, match='not managed'):
            call()


def test_a_guest_gone_from_libvirt_is_an_error(guest, hv):
    driver, dom = guest
    del hv.domains[U1]
    with pytest.raises(base.DriverError, match='domain %s: Domain not '
                       'found' % U1):
        driver.pin_vcpus(U1, frozenset({2}))


def test_release_restores_the_definition_pins_and_all_vcpus(
        host, hv, monkeypatch):
    monkeypatch.setattr(os, 'cpu_count', lambda: 8)
    targets = []
    monkeypatch.setattr(host_channel.HostChannel, 'set_target',
                        lambda self, n: targets.append(n) or 1)
    host.boot(U1, nova_xml(U1, vcpus=2, cpuset='2-7', emulatorpin='2-3'),
              pid=500, iothreads=[1])
    driver = host.driver(attach_channels=True)
    driver.guests()
    driver.release(U1)
    assert targets == [2]
    assert _calls(hv, 'pinVcpuFlags') == [
        (0, _bits(8, range(2, 8)), LIVE), (1, _bits(8, range(2, 8)), LIVE)]
    assert _calls(hv, 'pinEmulator') == [(_bits(8, {2, 3}), LIVE)]
    assert _calls(hv, 'pinIOThread') == [(1, _bits(8, {2, 3}), LIVE)]


def test_release_tries_every_step_and_reports_every_error(
        host, hv, monkeypatch):
    def broken(self, n):
        raise OSError('page is gone')

    monkeypatch.setattr(host_channel.HostChannel, 'set_target', broken)
    dom = host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver(attach_channels=True)
    driver.guests()
    dom.fail['pinVcpuFlags'] = lv.libvirtError('vcpu cgroup gone')
    dom.fail['pinEmulator'] = lv.libvirtError('emulator cgroup gone')
    with pytest.raises(base.DriverError) as err:
        driver.release(U1)
    assert str(err.value) == (
        'release of %s: target: page is gone; restore vCPU 0 of %s: vcpu '
        'cgroup gone; restore emulator of %s: emulator cgroup gone'
        % (U1, U1, U1))


def test_release_pins_even_when_the_target_fails(host, hv, monkeypatch):
    def broken(self, n):
        raise ValueError('bad target')

    monkeypatch.setattr(host_channel.HostChannel, 'set_target', broken)
    host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver(attach_channels=True)
    driver.guests()
    with pytest.raises(base.DriverError, match='^release of .*: target: '
                       'bad target$'):
        driver.release(U1)
    assert len(_calls(hv, 'pinVcpuFlags')) == 2
    assert len(_calls(hv, 'pinEmulator')) == 1


def test_release_without_a_channel_only_restores_pins(guest, hv):
    driver, dom = guest
    driver.release(U1)
    assert len(_calls(hv, 'pinVcpuFlags')) == 2
    assert len(_calls(hv, 'pinEmulator')) == 1


def test_observe_sums_the_threads_of_each_pool(host, hv):
    host.boot(U1, nova_xml(U1), pid=500)
    fakehost.write_qemu(host.proc, 500, 2, others=('IO iothread1',),
                        vhost=(901,))
    (host.proc / '500' / 'task' / '501' / 'schedstat').write_text(
        '1000 300 7\n')
    (host.proc / '901' / 'task' / '901' / 'schedstat').write_text(
        '100 50 3\n')
    driver = host.driver()
    driver.guests()
    obs = driver.observe(U1)
    # vCPUs 501 and 502; main thread 500, iothread 503 and vhost 901.
    assert (obs.vcpu_cpu_ns, obs.vcpu_wait_ns, obs.vcpu_slices) == (
        1100, 320, 10)
    assert (obs.emulator_cpu_ns, obs.emulator_wait_ns) == (300, 90)
    assert obs.emulator_threads == 3
    assert obs.guest is None


def test_a_process_named_like_a_vhost_thread_is_not_the_guests(host, hv):
    """Only the kernel makes vhost workers; anybody can take the name."""
    host.boot(U1, nova_xml(U1), pid=500)
    # Linux 6.4 on: the worker is a thread of QEMU (504); before, a
    # kernel thread (901). 950 is a user's process that named itself so.
    fakehost.write_qemu(host.proc, 500, 2,
                        others=('IO iothread1', 'vhost-500'), vhost=(901,))
    impostor = host.proc / '950'
    (impostor / 'task' / '950').mkdir(parents=True)
    for path in (impostor, impostor / 'task' / '950'):
        (path / 'comm').write_text('vhost-500\n')
        (path / 'schedstat').write_text('9000000 9000000 9\n')
        (path / 'stat').write_text(fakehost.stat_line(950, 'vhost-500'))
    driver = host.driver()
    driver.guests()
    obs = driver.observe(U1)
    # Main thread, iothread, the in-process worker and the kernel thread.
    assert obs.emulator_threads == 4
    assert (obs.emulator_cpu_ns, obs.emulator_wait_ns) == (400, 80)


def _nova34(name, cpu_map):
    from ufo_agent.tests import nova_fixtures
    return nova_fixtures.adapt(nova_fixtures.xml(name), cpu_map, uuid=U1,
                               name='instance-0000002a')


# Nova 34's fake host: shared 1-2,8-9 (node 0: 0-6, node 1: 7-13). Here
# one node: its shared CPUs become 2-3, everything else 0.
_ONE_NODE = {cpu: {1: 2, 2: 3, 8: 2, 9: 3}.get(cpu, 0)
             for cpu in range(14)}


def test_numa_guest_is_restored_per_vcpu_not_onto_every_cpu(
        host, hv, monkeypatch):
    # Defect: Nova gives NUMA guests per-vCPU <vcpupin> and no cpuset;
    # release restored every online CPU, dedicated and reserved ones too.
    monkeypatch.setattr(os, 'cpu_count', lambda: 8)
    fakehost.write_sysfs(host.sysfs / 'numa', '0-7',
                         numa={cpu: 0 for cpu in range(8)})
    host.boot(U1, _nova34('shared-numa', _ONE_NODE), pid=500,
              iothreads=[1])
    driver = host.driver(managed_cpus=frozenset({2, 3}),
                         sysfs_root=str(host.sysfs / 'numa'))
    assert [g.uuid for g in driver.guests()] == [U1]
    driver.pin_vcpus(U1, frozenset({3}))
    hv.calls.clear()
    driver.release(U1)
    assert _calls(hv, 'pinVcpuFlags') == [
        (0, _bits(8, {2, 3}), LIVE), (1, _bits(8, {2, 3}), LIVE)]
    assert _calls(hv, 'pinEmulator') == [(_bits(8, {2, 3}), LIVE)]
    assert _calls(hv, 'pinIOThread') == [(1, _bits(8, {2, 3}), LIVE)]


def test_numa_bound_guest_on_a_two_node_host_is_left_alone(
        host, hv, caplog):
    # Pinned without regard to its NUMA memory binding while managed: until
    # the controller places guests by node, such a guest is hands off.
    caplog.set_level(logging.INFO)
    fakehost.write_sysfs(host.sysfs / 'two', '0-13',
                         numa={cpu: cpu // 7 for cpu in range(14)})
    host.boot(U1, _nova34('shared-numa', {c: c for c in range(14)}),
              pid=500)
    driver = host.driver(managed_cpus=frozenset({1, 2, 8, 9}),
                         sysfs_root=str(host.sysfs / 'two'))
    assert driver.guests() == []
    assert 'does not place guests by NUMA node' in caplog.text


def _cgroups(host, tmp_path, pid=500, vcpus=2, idle=0):
    """libvirt's v1 cgroupfs layout for the QEMU process ``pid``."""
    cg = tmp_path / 'cgroup'
    vm = '/machine/qemu-1-vm.libvirt-qemu'
    (host.proc / 'self').mkdir(parents=True, exist_ok=True)
    (host.proc / 'self' / 'mountinfo').write_text(
        '32 31 0:29 / %s/cpu rw - cgroup cgroup rw,cpu\n' % cg)
    groups = {pid: vm + '/emulator'}
    groups.update({pid + 1 + i: '%s/vcpu%d' % (vm, i) for i in range(vcpus)})
    for tid, path in groups.items():
        (host.proc / str(pid) / 'task' / str(tid) / 'cgroup').write_text(
            '1:cpu:%s\n' % path)
        (cg / 'cpu' / path.lstrip('/')).mkdir(parents=True, exist_ok=True)
        (cg / 'cpu' / path.lstrip('/') / 'cgroup.procs').write_text(
            '%d\n' % pid if tid == pid else '')
    knob = cg / 'cpu' / vm.lstrip('/') / 'cpu.idle'
    knob.write_text('%d\n' % idle)
    return knob


def test_idle_priority_is_set_on_the_guests_group(guest, host, tmp_path):
    driver, _ = guest
    knob = _cgroups(host, tmp_path)
    driver.set_vcpus_idle(U1, True)
    assert knob.read_text() == '1'
    driver.set_vcpus_idle(U1, False)
    assert knob.read_text() == '0'


def test_release_restores_normal_priority_after_the_pins(guest, host, hv,
                                                         tmp_path):
    driver, _ = guest
    knob = _cgroups(host, tmp_path, idle=1)
    driver.release(U1)
    assert knob.read_text() == '0'
    assert len(_calls(hv, 'pinVcpuFlags')) == 2


def test_release_keeps_idle_priority_while_vcpu_pins_are_not_restored(
        guest, host, tmp_path):
    driver, dom = guest
    knob = _cgroups(host, tmp_path, idle=1)
    dom.fail['pinVcpuFlags'] = lv.libvirtError('vcpu cgroup gone')
    with pytest.raises(base.DriverError, match='idle priority of .* kept'):
        driver.release(U1)
    assert knob.read_text() == '1\n'


def test_idle_priority_of_a_group_shared_with_others_is_refused(
        guest, host, tmp_path):
    driver, _ = guest
    knob = _cgroups(host, tmp_path)
    (knob.parent / 'vcpu1' / 'cgroup.procs').write_text('4242\n')
    with pytest.raises(base.DriverError, match='other processes'):
        driver.set_vcpus_idle(U1, True)
    assert knob.read_text() == '0\n'


def _with_iothread(xml):
    """One I/O thread, pinned to CPUs 2-3 in the definition."""
    return xml.replace("</vcpu>", "</vcpu>\n  <iothreads>1</iothreads>") \
        .replace('</cputune>',
                 "  <iothreadpin iothread='1' cpuset='2-3'/>\n  </cputune>")


def test_io_threads_are_restored_when_libvirt_does_not_list_them(
        host, hv, monkeypatch, caplog):
    monkeypatch.setattr(os, 'cpu_count', lambda: 8)
    dom = host.boot(U1, _with_iothread(nova_xml(U1, cpuset='2-7')),
                    pid=500, iothreads=[1])
    driver = host.driver()
    driver.guests()
    dom.fail['ioThreadInfo'] = lv.libvirtError('monitor error')
    # Pinned with the emulator, and back to the definition's on release.
    driver.pin_emulator(U1, frozenset({4}))
    driver.release(U1)
    assert _calls(hv, 'pinIOThread') == [(1, _bits(8, {4}), LIVE),
                                         (1, _bits(8, {2, 3}), LIVE)]
    assert 'I/O threads of %s not reported (monitor error)' % U1 \
        in caplog.text
