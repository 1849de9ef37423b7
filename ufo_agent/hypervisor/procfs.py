"""Read QEMU's threads and their scheduler statistics from /proc.

vCPU threads are named ``CPU <n>/KVM`` (or ``CPU <n>/TCG`` under
multi-threaded TCG); every other thread of the QEMU process (the main
loop, I/O threads, workers) and the ``vhost-<qemu pid>`` kernel threads
belong in the emulator pool. ``root`` points at another /proc for tests.
"""

import dataclasses
import os
import re

_VCPU_COMM = re.compile(r'^CPU (\d+)/(KVM|TCG)$')


@dataclasses.dataclass(frozen=True)
class QemuThreads:
    pid: int
    vcpus: dict          # vCPU index -> tid
    others: tuple        # every other tid of the process
    vhost: tuple         # pids of vhost kernel threads


@dataclasses.dataclass(frozen=True)
class SchedStat:
    """One ``/proc/<pid>/task/<tid>/schedstat``.

    Time on CPU, time waiting on a run queue (the run delay), and how many
    times the thread was scheduled in.
    """

    cpu_ns: int
    wait_ns: int
    slices: int


def _read(path):
    with open(path) as handle:
        return handle.read()


def qemu_threads(pid, root='/proc'):
    """Return :class:`QemuThreads` of a running QEMU process.

    Raises OSError if the process is gone.
    """
    vcpus, others = {}, []
    task_dir = os.path.join(root, str(pid), 'task')
    for name in sorted(os.listdir(task_dir), key=int):
        try:
            comm = _read(os.path.join(task_dir, name, 'comm')).strip()
        except FileNotFoundError:
            continue            # the thread exited meanwhile
        match = _VCPU_COMM.match(comm)
        if match:
            vcpus[int(match.group(1))] = int(name)
        else:
            others.append(int(name))
    return QemuThreads(pid, vcpus, tuple(others), vhost_threads(pid, root))


def vhost_threads(pid, root='/proc'):
    """Pids of the vhost kernel threads that serve QEMU process ``pid``."""
    wanted = 'vhost-%d' % pid
    found = []
    for name in os.listdir(root):
        if not name.isdigit():
            continue
        try:
            comm = _read(os.path.join(root, name, 'comm')).strip()
        except OSError:
            continue
        if comm == wanted:
            found.append(int(name))
    return tuple(sorted(found))


def parse_schedstat(text):
    fields = text.split()
    if len(fields) < 3:
        raise ValueError('schedstat has %d fields' % len(fields))
    return SchedStat(int(fields[0]), int(fields[1]), int(fields[2]))


def schedstat(pid, tid=None, root='/proc'):
    """:class:`SchedStat` of a thread (or of a process's main thread)."""
    if tid is None:
        path = os.path.join(root, str(pid), 'schedstat')
    else:
        path = os.path.join(root, str(pid), 'task', str(tid), 'schedstat')
    return parse_schedstat(_read(path))
