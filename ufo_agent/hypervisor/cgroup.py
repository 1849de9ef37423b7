"""A guest's cgroup and its ``cpu.idle`` knob (BE soak mode).

``cpu.idle = 1`` (Linux 5.15+, cgroup v1 ``cpu`` controller and v2)
makes a group an idle entity against its *siblings*: the kernel runs it
only where none of them has work and preempts it when one wakes. So the
knob belongs on the group that holds the whole guest and competes with
the other guests, not on libvirt's per-vCPU groups (``vcpuN``, whose
siblings are the same guest's threads): the lowest group holding every
thread of the guest, or, under a systemd machine scope on cgroup v2, the
scope above libvirt's nested ``libvirt`` group. A group that holds any
other process is never written.
"""

import os


class CgroupError(Exception):
    """A guest's group cannot be found, read or written."""


def _read(path):
    try:
        with open(path) as handle:
            return handle.read()
    except OSError as exc:
        raise CgroupError('%s: %s' % (path, exc.strerror or exc))


def cpu_mounts(proc_root='/proc'):
    """The hierarchies with the ``cpu`` controller: (v1, v2).

    Each is (mount point, the hierarchy's path mounted there) or None. A
    v1 mount counts only if ``cpu`` is among its controllers, a v2 one
    only if it offers the cpu controller.
    """
    v1 = v2 = None
    for line in _read(os.path.join(proc_root, 'self/mountinfo')).splitlines():
        left, sep, right = line.partition(' - ')
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        mount, fstype, options = (fields[4], fields[3]), tail[0], tail[2]
        if fstype == 'cgroup' and 'cpu' in options.split(',') and \
                v1 is None:
            v1 = mount
        elif fstype == 'cgroup2' and v2 is None:
            try:
                controllers = _read(os.path.join(
                    mount[0], 'cgroup.controllers')).split()
            except CgroupError:
                continue
            if 'cpu' in controllers:
                v2 = mount
    return v1, v2


def _directory(mount, path):
    """Where hierarchy path ``path`` is under ``mount``, or None."""
    point, root = mount
    root = root.rstrip('/')
    if path != root and not path.startswith(root + '/'):
        return None
    return os.path.join(point, path[len(root):].lstrip('/'))


def thread_group(pid, tid, proc_root='/proc'):
    """The path of the ``cpu`` group of one thread, within its hierarchy.

    Returns (path, v2): the v1 ``cpu`` line wins over the v2 line.
    """
    text = _read(os.path.join(proc_root, str(pid), 'task', str(tid),
                              'cgroup'))
    unified = None
    for line in text.splitlines():
        parts = line.split(':', 2)
        if len(parts) != 3:
            continue
        if 'cpu' in parts[1].split(','):
            return parts[2], False
        if parts[0] == '0' and parts[1] == '':
            unified = parts[2]
    if unified is None:
        raise CgroupError('thread %s of %s is in no cpu cgroup' % (tid, pid))
    return unified, True


def _common(paths):
    split = [[p for p in path.split('/') if p] for path in paths]
    common = []
    for names in zip(*split):
        if len(set(names)) != 1:
            break
        common.append(names[0])
    return '/' + '/'.join(common)


def _procs_below(directory):
    """Every pid listed in ``cgroup.procs`` at or below ``directory``."""
    pids = set()
    for top, dirs, files in os.walk(directory):
        if 'cgroup.procs' in files:
            pids |= {int(p) for p in _read(os.path.join(
                top, 'cgroup.procs')).split()}
    return pids


def guest_group(pid, tids, proc_root='/proc'):
    """The directory of the group that holds the whole guest.

    ``pid`` is its QEMU process, ``tids`` its vCPU (and other) threads.
    """
    v1, v2 = cpu_mounts(proc_root)
    found = [thread_group(pid, tid, proc_root) for tid in set(tids) | {pid}]
    unified = {v for _, v in found}
    if len(unified) != 1:
        raise CgroupError('threads of %s are in both cgroup versions' % pid)
    mount = v2 if unified.pop() else v1
    path = _common(path for path, _ in found)
    if os.path.basename(path) == 'libvirt':
        path = os.path.dirname(path)
    if path == '/':
        raise CgroupError('the threads of %s share only the root cgroup'
                          % pid)
    directory = _directory(mount, path) if mount else None
    if directory is None:
        raise CgroupError('group %s of %s is not under a mounted cgroup '
                          'hierarchy with the cpu controller' % (path, pid))
    others = _procs_below(directory) - {pid}
    if others:
        raise CgroupError('%s holds other processes (%s): not the group of '
                          'guest process %s' % (
                              directory, ', '.join(map(str, sorted(others))),
                              pid))
    return directory


def read_idle(group):
    path = os.path.join(group, 'cpu.idle')
    value = _read(path).strip()
    if value not in ('0', '1'):
        raise CgroupError('%s: unexpected value %r' % (path, value))
    return value == '1'


def write_idle(group, idle):
    path = os.path.join(group, 'cpu.idle')
    try:
        with open(path, 'w') as handle:
            handle.write('1' if idle else '0')
    except OSError as exc:
        raise CgroupError('%s: %s' % (path, exc.strerror or exc))


def _read_only(mount, proc_root):
    """True when the mount point ``mount`` is mounted read-only."""
    for line in _read(os.path.join(proc_root, 'self/mountinfo')).splitlines():
        fields = line.partition(' - ')[0].split()
        if len(fields) >= 6 and fields[4] == mount:
            return 'ro' in fields[5].split(',')
    return False


def _may_write(path):
    """None when this process may open ``path`` for writing, else why.

    Opened, never written: the kernel checks the mount, the file's mode
    and this process's capabilities as a write would.
    """
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CLOEXEC))
    except OSError as exc:
        return '%s: %s' % (path, exc.strerror or exc)
    return None


def check_cpu_idle(proc_root='/proc'):
    """Raise CgroupError unless this process can set ``cpu.idle``.

    A cpu hierarchy must offer ``cpu.idle`` (Linux 5.15+), be mounted
    read-write (systemd's ``ProtectControlGroups=yes`` mounts it
    read-only for the service) and let this process write its groups'
    files (root's, the packaged unit's unprivileged user may not).
    """
    v1, v2 = cpu_mounts(proc_root)
    found = None
    for point, _ in filter(None, (v1, v2)):
        # The v2 root has no cpu.* files: look one level down too.
        try:
            names = os.listdir(point)
        except OSError as exc:
            raise CgroupError('%s: %s' % (point, exc.strerror or exc))
        candidates = [point] + sorted(
            os.path.join(point, name) for name in names
            if os.path.isdir(os.path.join(point, name)))
        files = [os.path.join(c, 'cpu.idle') for c in candidates
                 if os.path.exists(os.path.join(c, 'cpu.idle'))]
        if files:
            found = point, files
            break
    if found is None:
        if v1 is None and v2 is None:
            raise CgroupError('no cgroup hierarchy with the cpu controller '
                              'is mounted')
        raise CgroupError('the kernel\'s cpu controller has no cpu.idle '
                          '(Linux 5.15 or later)')
    point, files = found
    if _read_only(point, proc_root):
        raise CgroupError('%s is mounted read-only for ufo-agent (under '
                          'systemd: ProtectControlGroups=yes, as in the '
                          'packaged unit)' % point)
    problems = [_may_write(path) for path in files]
    if all(problems):
        raise CgroupError('ufo-agent (uid %d) may not write the cpu.idle '
                          'of the cgroups: %s' % (os.geteuid(),
                                                  problems[-1]))
