"""Finding a guest's cgroup and its cpu.idle on fake /proc and cgroups."""

import os

import pytest

from ufo_agent.hypervisor import cgroup

V1_MOUNTS = (
    '31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n'
    '32 31 0:29 / {cg}/cpu rw,relatime - cgroup cgroup rw,cpu\n'
    '33 31 0:30 / {cg}/cpuset rw,relatime - cgroup cgroup rw,cpuset\n')
V1_COMBINED = ('32 31 0:29 / {cg}/cpu,cpuacct rw - cgroup cgroup '
               'rw,cpu,cpuacct\n')
V2_MOUNTS = '30 23 0:27 / {cg}/unified rw - cgroup2 cgroup2 rw\n'


def _tree(tmp_path, mounts, threads, groups, v2_controllers='cpu io'):
    """A fake /proc (threads: tid -> cgroup file text) and cgroup dirs.

    ``groups`` maps a directory under the cgroup root to (cpu.idle,
    pids in its cgroup.procs).
    """
    proc, cg = tmp_path / 'proc', tmp_path / 'cg'
    (proc / 'self').mkdir(parents=True)
    (proc / 'self' / 'mountinfo').write_text(mounts.format(cg=cg))
    for tid, text in threads.items():
        task = proc / '500' / 'task' / str(tid)
        task.mkdir(parents=True)
        (task / 'cgroup').write_text(text)
    for path, (idle, pids) in groups.items():
        group = cg / path
        group.mkdir(parents=True, exist_ok=True)
        if idle is not None:
            (group / 'cpu.idle').write_text('%d\n' % idle)
        (group / 'cgroup.procs').write_text(''.join('%d\n' % p for p in pids))
    if 'cgroup2' in mounts:
        (cg / 'unified').mkdir(parents=True, exist_ok=True)
        (cg / 'unified' / 'cgroup.controllers').write_text(v2_controllers)
    return str(proc), cg


def _v1_threads(controllers='cpu'):
    vm = '/machine/qemu-1-vm.libvirt-qemu'
    return {500: '1:%s:%s/emulator\n0::%s/emulator\n' % (controllers, vm, vm),
            501: '1:%s:%s/vcpu0\n0::%s/vcpu0\n' % (controllers, vm, vm),
            502: '1:%s:%s/vcpu1\n0::%s/vcpu1\n' % (controllers, vm, vm)}


V1_GROUPS = {'cpu/machine/qemu-1-vm.libvirt-qemu': (0, []),
             'cpu/machine/qemu-1-vm.libvirt-qemu/emulator': (0, [500]),
             'cpu/machine/qemu-1-vm.libvirt-qemu/vcpu0': (0, []),
             'cpu/machine/qemu-1-vm.libvirt-qemu/vcpu1': (0, []),
             'cpu/machine': (0, [])}


def test_the_guest_group_is_above_libvirts_per_vcpu_groups_on_v1(tmp_path):
    proc, cg = _tree(tmp_path, V1_MOUNTS, _v1_threads(), V1_GROUPS)
    group = cgroup.guest_group(500, [501, 502], proc)
    assert group == str(cg / 'cpu/machine/qemu-1-vm.libvirt-qemu')
    assert cgroup.read_idle(group) is False
    cgroup.write_idle(group, True)
    assert (cg / 'cpu/machine/qemu-1-vm.libvirt-qemu/cpu.idle').read_text() \
        == '1'
    assert cgroup.read_idle(group) is True
    cgroup.write_idle(group, False)
    assert cgroup.read_idle(group) is False


def test_a_combined_cpu_cpuacct_mount_is_found(tmp_path):
    groups = {k.replace('cpu/', 'cpu,cpuacct/', 1): v
              for k, v in V1_GROUPS.items()}
    proc, cg = _tree(tmp_path, V1_COMBINED, _v1_threads('cpu,cpuacct'),
                     groups)
    assert cgroup.guest_group(500, [501, 502], proc) == str(
        cg / 'cpu,cpuacct/machine/qemu-1-vm.libvirt-qemu')


def test_on_v2_under_systemd_the_machine_scope_is_the_guest_group(tmp_path):
    scope = '/machine.slice/machine-qemu\\x2d1\\x2dvm.scope'
    threads = {500: '0::%s/libvirt/emulator\n' % scope,
               501: '0::%s/libvirt/vcpu0\n' % scope,
               502: '0::%s/libvirt/vcpu1\n' % scope}
    base = 'unified' + scope
    groups = {base: (0, []), base + '/libvirt': (0, []),
              base + '/libvirt/emulator': (0, [500]),
              base + '/libvirt/vcpu0': (0, []),
              base + '/libvirt/vcpu1': (0, []),
              'unified/machine.slice': (0, [])}
    proc, cg = _tree(tmp_path, V2_MOUNTS, threads, groups)
    assert cgroup.guest_group(500, [501, 502], proc) == str(cg / base)


def test_a_group_holding_another_process_is_refused(tmp_path):
    groups = dict(V1_GROUPS)
    groups['cpu/machine/qemu-1-vm.libvirt-qemu/vcpu1'] = (0, [777])
    proc, _ = _tree(tmp_path, V1_MOUNTS, _v1_threads(), groups)
    with pytest.raises(cgroup.CgroupError, match=r'other processes \(777\)'):
        cgroup.guest_group(500, [501, 502], proc)


def test_threads_sharing_only_the_root_are_refused(tmp_path):
    threads = {500: '1:cpu:/\n', 501: '1:cpu:/\n'}
    proc, _ = _tree(tmp_path, V1_MOUNTS, threads, {'cpu': (None, [500])})
    with pytest.raises(cgroup.CgroupError, match='only the root cgroup'):
        cgroup.guest_group(500, [501], proc)


def test_a_v2_hierarchy_without_the_cpu_controller_does_not_count(tmp_path):
    threads = {500: '0::/machine/vm/emulator\n', 501: '0::/machine/vm/vcpu0\n'}
    groups = {'unified/machine/vm': (0, []),
              'unified/machine/vm/emulator': (0, [500]),
              'unified/machine/vm/vcpu0': (0, [])}
    proc, _ = _tree(tmp_path, V2_MOUNTS, threads, groups,
                    v2_controllers='hugetlb')
    with pytest.raises(cgroup.CgroupError, match='not under a mounted'):
        cgroup.guest_group(500, [501], proc)
    with pytest.raises(cgroup.CgroupError, match='no cgroup hierarchy'):
        cgroup.check_cpu_idle(proc)


def test_a_bad_cpu_idle_value_names_the_file(tmp_path):
    proc, cg = _tree(tmp_path, V1_MOUNTS, _v1_threads(), V1_GROUPS)
    path = cg / 'cpu/machine/qemu-1-vm.libvirt-qemu/cpu.idle'
    path.write_text('2\n')
    with pytest.raises(cgroup.CgroupError, match='cpu.idle: unexpected'):
        cgroup.read_idle(str(path.parent))


def test_cpu_idle_support_is_checked(tmp_path):
    proc, cg = _tree(tmp_path, V1_MOUNTS, _v1_threads(), V1_GROUPS)
    cgroup.check_cpu_idle(proc)
    for path in cg.rglob('cpu.idle'):
        path.unlink()
    with pytest.raises(cgroup.CgroupError, match='no cpu.idle'):
        cgroup.check_cpu_idle(proc)


def test_soak_is_refused_where_the_cgroups_are_mounted_read_only(tmp_path):
    """systemd's ProtectControlGroups=yes, as in the packaged unit."""
    mounts = V2_MOUNTS.replace('{cg}/unified rw -', '{cg}/unified ro,nosuid -')
    groups = {'unified/machine.slice': (0, [])}
    proc, cg = _tree(tmp_path, mounts, {}, groups)
    with pytest.raises(cgroup.CgroupError) as refused:
        cgroup.check_cpu_idle(proc)
    assert str(refused.value) == (
        '%s is mounted read-only for ufo-agent (under systemd: '
        'ProtectControlGroups=yes, as in the packaged unit)' % (
            cg / 'unified'))


def test_soak_is_refused_where_this_user_may_not_write_cpu_idle(
        tmp_path, monkeypatch):
    """The packaged unit's user: the guests' groups are root's, 0644."""
    groups = {'unified/machine.slice': (0, []), 'unified/user.slice': (0, [])}
    proc, cg = _tree(tmp_path, V2_MOUNTS, {}, groups)
    real_open = os.open

    def as_unprivileged(path, flags, *args):
        if str(path).endswith('cpu.idle') and flags & os.O_WRONLY:
            raise PermissionError(13, 'Permission denied', path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, 'open', as_unprivileged)
    with pytest.raises(cgroup.CgroupError, match='may not write the cpu.idle '
                       'of the cgroups: .*user.slice/cpu.idle: Permission '
                       'denied'):
        cgroup.check_cpu_idle(proc)
    monkeypatch.undo()
    cgroup.check_cpu_idle(proc)             # as this test's user: it may
