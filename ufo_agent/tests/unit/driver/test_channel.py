"""The libvirt driver's guest channel pages and shmem devices."""

import os
import stat
import xml.etree.ElementTree as ET

import pytest

from ufo_agent.channel import host_channel
from ufo_agent.channel import layout
from ufo_agent.channel import report
from ufo_tools.fakes import fakehost
from ufo_tools.fakes.fakehost import nova_xml
from ufo_tools.fakes import fakelibvirt as lv

U1 = '8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d'
U2 = '3b7e0a52-6c1d-4f0e-a9b8-7d6c5b4a3f2e'
U3 = 'c0ffee00-1234-4abc-8def-0123456789ab'
GONE = 'deadbeef-0000-4000-8000-000000000000'


def _attached(hv):
    return [call[2:] for call in hv.calls if call[1] == 'attachDeviceFlags']


def test_page_is_set_up_then_attached_as_migration_master(host, hv):
    host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver(attach_channels=True, shm_size_mib=2)
    [guest] = driver.guests()
    assert guest.has_channel
    page = host.shm / ('ufo-' + U1)
    assert page.stat().st_size == 2 * 1024 * 1024
    # Handed to "QEMU" (this test's user, see conftest) on the descriptor.
    st = page.stat()
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())
    assert stat.S_IMODE(st.st_mode) == 0o660
    [(device, flags)] = _attached(hv)
    assert flags == lv.VIR_DOMAIN_AFFECT_LIVE
    shmem = ET.fromstring(device)
    assert shmem.tag == 'shmem'
    assert shmem.attrib == {'name': 'ufo-' + U1, 'role': 'master'}
    assert shmem.find('model').attrib == {'type': 'ivshmem-plain'}
    assert shmem.find('size').attrib == {'unit': 'M'}
    assert shmem.find('size').text == '2'


def test_a_restarted_agent_does_not_attach_again(host, hv):
    host.boot(U1, nova_xml(U1), pid=500)
    host.driver(attach_channels=True).guests()
    host.drivers[0].close()
    [guest] = host.driver(attach_channels=True).guests()
    assert guest.has_channel
    assert len(_attached(hv)) == 1


def test_attach_failure_leaves_a_managed_guest_without_channel(host, hv):
    dom = host.boot(U1, nova_xml(U1), pid=500)
    dom.fail['attachDeviceFlags'] = lv.libvirtError(
        'internal error: unable to execute QEMU command device_add')
    [guest] = host.driver(attach_channels=True).guests()
    assert not guest.has_channel


def test_dry_run_attaches_nothing(host, hv):
    host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver(attach_channels=False)
    [guest] = driver.guests()
    assert not guest.has_channel and _attached(hv) == []
    assert list(host.shm.iterdir()) == []
    assert driver.set_vcpu_target(U1, 1) is None
    assert driver.acknowledged(U1, 5)


def test_targets_are_clamped_to_the_domain_vcpus(host, hv, monkeypatch):
    targets = []
    monkeypatch.setattr(host_channel.HostChannel, 'set_target',
                        lambda self, n: targets.append(n) or len(targets))
    host.boot(U1, nova_xml(U1, vcpus=2, flavor_vcpus=4), pid=500)
    driver = host.driver(attach_channels=True)
    driver.guests()
    assert driver.set_vcpu_target(U1, 9) == 1
    assert driver.set_vcpu_target(U1, 0) == 2
    assert targets == [2, 1]
    assert not driver.acknowledged(U1, 2)      # no guest module


def test_reboot_resets_the_channel_history(host, hv, monkeypatch):
    resets = []
    monkeypatch.setattr(host_channel.HostChannel, 'reset_history',
                        lambda self: resets.append(self.path))
    dom = host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver(attach_channels=True)
    driver.guests()
    del resets[:]                       # initialize() starts afresh too
    hv.conn.fire_reboot(dom)
    driver.events()
    assert resets == [str(host.shm / ('ufo-' + U1))]


def _publish(page, count):
    ch = host_channel.HostChannel(str(page), 2, create=False)
    try:
        ch.write_raw(layout.GUEST_OFFSET, layout.pack(
            layout.GUEST_FIELDS, layout.GUEST_STRUCT, dict(
                magic=layout.GUEST_MAGIC, abi_version=layout.ABI_VERSION,
                seq=2, flags=layout.GUEST_FLAG_HOST_VALID,
                ack_target_seq=0, applied_target=0, online_vcpus=2,
                present_vcpus=2, sample_count=count,
                timestamp_ns=count * 10 ** 9, interval_ns=10 ** 9,
                util=5000, steal=0, ctxsw_per_sec=1000,
                own_ctxsw_per_sec=100, online_mask=(3, 0, 0, 0))))
    finally:
        ch.close()


def _module_running(host):
    """A guest whose module has published 40 samples: (dom, driver, page)."""
    dom = host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver(attach_channels=True)
    driver.guests()
    page = host.shm / ('ufo-' + U1)
    _publish(page, 40)
    assert driver.observe(U1).guest.ok
    return dom, driver, page


def test_a_rebooted_guest_s_page_waits_for_its_new_module(host, hv):
    dom, driver, page = _module_running(host)
    hv.conn.fire_reboot(dom)
    driver.events()
    # No target can be answered before the new boot's module loads.
    assert driver.observe(U1).guest.status == report.STATUS_ABSENT
    _publish(page, 1)
    assert driver.observe(U1).guest.ok


def test_a_new_qemu_s_page_waits_for_its_new_module(host, hv):
    dom, driver, page = _module_running(host)
    # Destroyed and started again (a hard reboot): a new QEMU, same page.
    dom.running = False
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_STOPPED)
    driver.events()
    dom.running, dom.dom_id = True, 7
    (host.run / 'instance-0000002a.pid').write_text('700\n')
    fakehost.write_qemu(host.proc, 700, 2)
    hv.conn.fire_lifecycle(dom, lv.VIR_DOMAIN_EVENT_STARTED)
    driver.events()
    driver.guests()
    assert driver.observe(U1).guest.status == report.STATUS_ABSENT
    _publish(page, 1)
    assert driver.observe(U1).guest.ok


def test_stale_pages_of_gone_domains_are_removed(host, hv):
    host.boot(U1, nova_xml(U1), pid=500)
    host.boot(U2, nova_xml(U2, name='instance-0000002b'), pid=600,
              name='instance-0000002b', running=False)
    for name in ('ufo-' + U1, 'ufo-' + U2, 'ufo-' + GONE, 'ufo-short',
                 'other-' + GONE, 'ufo-' + GONE + '-x'):
        (host.shm / name).write_bytes(b'\0' * 64)
    assert host.driver().remove_stale_pages() == [GONE]
    assert sorted(p.name for p in host.shm.iterdir()) == sorted([
        'ufo-' + U1, 'ufo-' + U2, 'ufo-short', 'other-' + GONE,
        'ufo-' + GONE + '-x'])


def test_stale_pages_removes_only_regular_files_of_root_or_qemu(
        host, hv, monkeypatch, tmp_path):
    gone = ['deadbeef-0000-4000-8000-00000000000%d' % i for i in range(5)]
    target = tmp_path / 'precious'
    target.write_bytes(b'keep')
    (host.shm / ('ufo-' + gone[0])).symlink_to(target)
    (host.shm / ('ufo-' + gone[1])).mkdir()
    os.mkfifo(str(host.shm / ('ufo-' + gone[2])))
    (host.shm / ('ufo-' + gone[3])).write_bytes(b'\0')     # someone else's
    (host.shm / ('ufo-' + gone[4])).write_bytes(b'\0')     # ours
    real_lstat = os.lstat

    def lstat(path, *a, **kw):
        st = real_lstat(path, *a, **kw)
        if str(path).endswith(gone[3]):
            fields = list(st)
            fields[stat.ST_UID] = 4242
            return os.stat_result(fields)
        return st
    monkeypatch.setattr(os, 'lstat', lstat)
    assert host.driver().remove_stale_pages() == [gone[4]]
    left = sorted(p.name for p in host.shm.iterdir())
    assert left == sorted('ufo-' + u for u in gone[:4])
    assert target.read_bytes() == b'keep'


def test_a_foreign_file_at_the_page_name_means_no_channel(
        host, hv, monkeypatch, caplog):
    host.boot(U1, nova_xml(U1), pid=500)
    page = host.shm / ('ufo-' + U1)
    page.write_bytes(b'\xa5' * 4096)
    # Pre-created by another user at the predictable name.
    monkeypatch.setattr(host_channel, 'trusted_uids',
                        lambda owner=None: {os.getuid() + 1})
    [guest] = host.driver(attach_channels=True).guests()
    assert not guest.has_channel
    assert _attached(hv) == []
    assert page.read_bytes() == b'\xa5' * 4096
    assert 'No channel for %s' % U1 in caplog.text
    assert 'refusing it' in caplog.text


def test_a_symlink_at_the_page_name_means_no_channel(
        host, hv, tmp_path, caplog):
    host.boot(U1, nova_xml(U1), pid=500)
    target = tmp_path / 'precious'
    target.write_bytes(b'keep')
    (host.shm / ('ufo-' + U1)).symlink_to(target)
    [guest] = host.driver(attach_channels=True).guests()
    assert not guest.has_channel and _attached(hv) == []
    assert target.read_bytes() == b'keep'
    assert 'symbolic link' in caplog.text


def test_stale_pages_follow_the_name_prefix(host, hv):
    for name in ('ufo-' + GONE, 'x-' + GONE):
        (host.shm / name).write_bytes(b'\0')
    assert host.driver(name_prefix='x-').remove_stale_pages() == [GONE]
    assert [p.name for p in host.shm.iterdir()] == ['ufo-' + GONE]


def test_forget_closes_and_removes_the_page(host, hv):
    host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver(attach_channels=True)
    driver.guests()
    driver.forget(U1)
    assert list(host.shm.iterdir()) == []
    driver.forget(U1)                   # twice is fine
    driver.forget(U3)


def test_forget_leaves_what_is_not_a_page_alone(host, hv, tmp_path):
    (host.shm / ('ufo-' + U1)).mkdir()
    target = tmp_path / 'precious'
    target.write_bytes(b'keep')
    (host.shm / ('ufo-' + U2)).symlink_to(target)
    driver = host.driver()
    driver.forget(U1)
    driver.forget(U2)
    assert (host.shm / ('ufo-' + U1)).is_dir()
    assert (host.shm / ('ufo-' + U2)).is_symlink()
    assert target.read_bytes() == b'keep'


def test_heartbeat_beats_every_channel(host, hv, monkeypatch):
    beats = []
    monkeypatch.setattr(host_channel.HostChannel, 'beat',
                        lambda self: beats.append(self.path))
    host.boot(U1, nova_xml(U1), pid=500)
    host.boot(U2, nova_xml(U2, name='instance-0000002b'), pid=600,
              name='instance-0000002b')
    driver = host.driver(attach_channels=True)
    driver.guests()
    driver.heartbeat()
    assert sorted(beats) == sorted(str(host.shm / ('ufo-' + u))
                                   for u in (U1, U2))


def test_restore_uses_attached_channels_and_attaches_nothing(host, hv):
    host.boot(U1, nova_xml(U1), pid=500)
    host.driver(attach_channels=True).guests()
    host.drivers[0].close()
    host.boot(U2, nova_xml(U2, name='instance-0000002b'), pid=600,
              name='instance-0000002b')
    # --restore: the driver the unit's ExecStopPost builds.
    driver = host.driver(attach_channels=False, use_attached_channels=True)
    guests = {g.uuid: g for g in driver.guests()}
    assert guests[U1].has_channel and not guests[U2].has_channel
    assert len(_attached(hv)) == 1            # the agent's, none since
    assert not (host.shm / ('ufo-' + U2)).exists()
    driver.release(U1)
    with host_channel.HostChannel(str(host.shm / ('ufo-' + U1)), 2,
                                  create=False) as page:
        page.initialize()
        assert page.target == 2           # every vCPU asked back online


@pytest.fixture
def rhel_qemu(monkeypatch):
    """QEMU runs as qemu:qemu, this test's own user; libvirt-qemu is 4243.

    Returns the (user, group) pairs the driver looked up.
    """
    asked = []
    users = {('qemu', 'qemu'): (os.getuid(), os.getgid()),
             (host_channel.DEFAULT_QEMU_USER,
              host_channel.DEFAULT_QEMU_GROUP): (4243, 4243)}

    def qemu_owner(user, group):
        asked.append((user, group))
        return users.get((user, group))
    monkeypatch.setattr(host_channel, 'qemu_owner', qemu_owner)
    return asked


def test_pages_go_to_the_configured_qemu_user_and_group(host, hv, rhel_qemu):
    host.boot(U1, nova_xml(U1), pid=500)
    driver = host.driver(attach_channels=True, qemu_user='qemu',
                         qemu_group='qemu')
    [guest] = driver.guests()
    assert guest.has_channel
    st = (host.shm / ('ufo-' + U1)).stat()
    # Handed over (mode 0660 on the descriptor) to the configured QEMU.
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())
    assert stat.S_IMODE(st.st_mode) == 0o660
    assert set(rhel_qemu) == {('qemu', 'qemu')}


def test_stale_pages_of_the_configured_qemu_user_are_removed(
        host, hv, monkeypatch):
    gone = ['deadbeef-0000-4000-8000-00000000000%d' % i for i in range(2)]
    for uuid in gone:
        (host.shm / ('ufo-' + uuid)).write_bytes(b'\0')
    uids = {gone[0]: 4242, gone[1]: 4243}
    real_lstat = os.lstat

    def lstat(path, *a, **kw):
        st = real_lstat(path, *a, **kw)
        for uuid, uid in uids.items():
            if str(path).endswith(uuid):
                fields = list(st)
                fields[stat.ST_UID] = uid
                return os.stat_result(fields)
        return st
    monkeypatch.setattr(os, 'lstat', lstat)
    # QEMU is qemu, uid 4242: its page goes; one of libvirt-qemu (4243),
    # not QEMU's user on this host, is foreign and stays.
    ids = {('qemu', 'qemu'): (4242, 4242),
           (host_channel.DEFAULT_QEMU_USER,
            host_channel.DEFAULT_QEMU_GROUP): (4243, 4243)}
    monkeypatch.setattr(host_channel, 'qemu_owner',
                        lambda user, group: ids.get((user, group)))
    driver = host.driver(qemu_user='qemu', qemu_group='qemu')
    assert driver.remove_stale_pages() == [gone[0]]
    assert [p.name for p in host.shm.iterdir()] == ['ufo-' + gone[1]]
