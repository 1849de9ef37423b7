"""Read QEMU's threads and their scheduler statistics from /proc.

vCPU threads are named ``CPU <n>/KVM`` (or ``CPU <n>/TCG`` under
multi-threaded TCG); every other thread of the QEMU process (the main
loop, I/O threads, workers) and its vhost workers belong in the emulator
pool. ``root`` points at another /proc for tests.

A vhost worker is told by facts only the kernel sets, never by a name
alone (any process may name itself ``vhost-<pid>``):

* since Linux 6.4 it is a thread of the QEMU process itself (a user
  worker), named ``vhost-<tid>`` after the QEMU thread that set the
  device up: a thread of QEMU's own task list;
* before, it is a kernel thread (``PF_KTHREAD`` in ``/proc/<pid>/stat``,
  a flag no user process can have) named ``vhost-<tid>`` after such a
  QEMU thread.
"""

import dataclasses
import functools
import os
import re
import resource
import typing

from ufo_agent import cpuset

_VCPU_COMM = re.compile(r'^CPU (\d+)/(KVM|TCG)$')
_VHOST_COMM = re.compile(r'^vhost-(\d+)$')
# include/linux/sched.h
PF_KTHREAD = 0x00200000


@dataclasses.dataclass(frozen=True)
class QemuThreads:
    """The threads of one QEMU process.

    ``tids`` is every thread of its task list; ``vhost`` holds a
    ``(pid, tid)`` pair per vhost worker, whose schedstat is
    ``/proc/<pid>/task/<tid>/schedstat``: ``pid`` is QEMU's for a user
    worker and the kernel thread's own for a kernel thread.
    """

    pid: int
    vcpus: dict          # vCPU index -> tid
    others: tuple        # every other tid of the process but vhost workers
    vhost: tuple         # (pid, tid) of each vhost worker
    tids: frozenset = frozenset()


class SchedStat(typing.NamedTuple):
    """One ``/proc/<pid>/task/<tid>/schedstat``.

    Time on CPU, time waiting on a run queue (the run delay), and how many
    times the thread was scheduled in. A tuple: one is made for every
    thread of every guest on each tick.
    """

    cpu_ns: int
    wait_ns: int
    slices: int


def _read(path):
    with open(path) as handle:
        return handle.read()


def task_ids(pid, root='/proc'):
    """The tids of a process's task list; OSError if it is gone."""
    return frozenset(int(name) for name in
                     os.listdir(os.path.join(root, str(pid), 'task'))
                     if name.isdigit())


def qemu_threads(pid, root='/proc', tids=None, vhost_kthreads=None):
    """Return :class:`QemuThreads` of a running QEMU process.

    ``tids`` is its task list if just read (:func:`task_ids`);
    ``vhost_kthreads`` is :func:`vhost_kernel_threads` if already read
    (one scan of /proc serves every guest). Raises OSError if the
    process is gone.
    """
    if tids is None:
        tids = task_ids(pid, root)
    vcpus, others, workers = {}, [], []
    task_dir = os.path.join(root, str(pid), 'task')
    for tid in sorted(tids):
        try:
            comm = _read(os.path.join(task_dir, str(tid), 'comm')).strip()
        except FileNotFoundError:
            continue            # the thread exited meanwhile
        match = _VCPU_COMM.match(comm)
        if match:
            vcpus[int(match.group(1))] = tid
        elif _VHOST_COMM.match(comm):
            workers.append((pid, tid))
        else:
            others.append(tid)
    if vhost_kthreads is None:
        vhost_kthreads = vhost_kernel_threads(root)
    for owner in sorted(tids):
        workers.extend((kpid, kpid) for kpid in vhost_kthreads.get(owner, ()))
    return QemuThreads(pid, vcpus, tuple(others), tuple(workers), tids)


class Stat(typing.NamedTuple):
    """What ufo-agent reads of a ``/proc/<pid>/stat`` line."""

    comm: str
    flags: int
    start_time: int     # clock ticks after boot: a process's identity


def parse_stat(text):
    """:class:`Stat` of a ``/proc/<pid>/stat`` line.

    The comm is between the first ``(`` and the last ``)``: it may hold
    spaces and parentheses itself. Raises ValueError for anything else.
    """
    try:
        start, end = text.index('('), text.rindex(')')
        # Fields 3 on: state ppid pgrp session tty_nr tpgid flags (9) ...
        # starttime (22).
        fields = text[end + 1:].split()
        return Stat(text[start + 1:end], int(fields[6]), int(fields[19]))
    except IndexError:
        raise ValueError('not a stat line: %r' % text[:80])


def start_time(pid, root='/proc'):
    """When process ``pid`` started (its stat's ``starttime``), or None.

    A pid is reused; a pid and its start time name one process.
    """
    try:
        text = _read(os.path.join(root, str(pid), 'stat'))
        return parse_stat(text).start_time
    except (OSError, ValueError):
        return None


def vhost_kernel_threads(root='/proc'):
    """{QEMU tid: (pid, ...)} of the vhost kernel threads of the host.

    Only kernel threads (``PF_KTHREAD``) named ``vhost-<tid>`` count.
    """
    found = {}
    for name in os.listdir(root):
        if not name.isdigit():
            continue
        try:
            comm, flags, _ = parse_stat(
                _read(os.path.join(root, name, 'stat')))
        except (OSError, ValueError):
            continue            # gone meanwhile, or not a stat line
        match = _VHOST_COMM.match(comm)
        if match and flags & PF_KTHREAD:
            found.setdefault(int(match.group(1)), []).append(int(name))
    return {owner: tuple(sorted(pids)) for owner, pids in found.items()}


def parse_schedstat(text):
    fields = text.split(None, 3)
    if len(fields) < 3:
        raise ValueError('schedstat has %d fields' % len(fields))
    return SchedStat(int(fields[0]), int(fields[1]), int(fields[2]))


def schedstat(pid, tid=None, root='/proc'):
    """:class:`SchedStat` of a thread (or of a process's main thread)."""
    if tid is None:
        path = '%s/%d/schedstat' % (root, pid)
    else:
        path = '%s/%d/task/%d/schedstat' % (root, pid, tid)
    # Read for every thread of every guest on each tick: one read(2) of
    # the bytes, without a text file object (several times cheaper).
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, 256)
    finally:
        os.close(fd)
    return parse_schedstat(data)


class ThreadCounters:
    """Reads the schedstat of many threads, each file kept open.

    Read on every tick for every thread of every guest, a kept
    descriptor is read again with one pread(2) from offset 0 (procfs
    generates the text anew), without a path lookup: about a fifth of
    an open, read and close. A descriptor stays bound to its thread: once
    the thread exits, reading it fails with ESRCH, never shows another
    thread that reused the tid. :meth:`keep` closes those of threads no
    longer read. All readers together keep at most half the process's
    descriptor limit open; past that a file is read without keeping it.
    """

    _kept = 0                   # descriptors kept by every reader

    def __init__(self, root='/proc'):
        self.root = root
        self._fds = {}          # (pid, tid) -> descriptor

    def read(self, pid, tid):
        """:class:`SchedStat` of thread ``tid`` of ``pid``.

        FileNotFoundError if the thread is gone.
        """
        return parse_schedstat(self._bytes((pid, tid)))

    def totals(self, keys):
        """(cpu_ns, wait_ns, slices, gone) summed over threads ``keys``.

        ``keys`` are ``(pid, tid)``; ``gone`` lists those whose thread
        is gone (left out of the sums), or is None. Summed without a
        :class:`SchedStat` per thread: every thread of every guest is
        read on each tick.
        """
        cpu = wait = slices = 0
        gone = None
        fds = self._fds
        for key in keys:
            fd = fds.get(key)
            try:
                data = self._bytes(key) if fd is None else \
                    os.pread(fd, 256, 0)
            except ProcessLookupError:
                self._close(key)
                gone = (gone or []) + [key]
                continue
            except FileNotFoundError:
                gone = (gone or []) + [key]
                continue
            fields = data.split(None, 3)
            if len(fields) < 3:
                raise ValueError('schedstat has %d fields' % len(fields))
            cpu += int(fields[0])
            wait += int(fields[1])
            slices += int(fields[2])
        return cpu, wait, slices, gone

    def _bytes(self, key):
        """The schedstat text of thread ``key``, its file kept open.

        FileNotFoundError if the thread is gone.
        """
        fd = self._fds.get(key)
        if fd is None:
            fd = os.open('%s/%d/task/%d/schedstat' % ((self.root,) + key),
                         os.O_RDONLY | os.O_CLOEXEC)
            if ThreadCounters._kept >= _most_kept():
                try:
                    return os.read(fd, 256)
                finally:
                    os.close(fd)
            self._fds[key] = fd
            ThreadCounters._kept += 1
        try:
            return os.pread(fd, 256, 0)
        except ProcessLookupError:
            self._close(key)
            raise FileNotFoundError('thread %d of %d is gone'
                                    % (key[1], key[0]))

    def keep(self, keys):
        """Close the descriptors of every thread not in ``keys``."""
        for key in [k for k in self._fds if k not in keys]:
            self._close(key)

    def _close(self, key):
        fd = self._fds.pop(key, None)
        if fd is not None:
            ThreadCounters._kept -= 1
            os.close(fd)

    def close(self):
        self.keep(())


def _most_kept():
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return (1 << 16) if soft == resource.RLIM_INFINITY else soft // 2


def keep_descriptor():
    """Count a descriptor another reader of /proc keeps open.

    It shares the :class:`ThreadCounters`' budget, half the process's
    limit: False, nothing counted, once that is spent (read by path
    then). :func:`release_descriptor` when it is closed.
    """
    if ThreadCounters._kept >= _most_kept():
        return False
    ThreadCounters._kept += 1
    return True


def release_descriptor():
    """A descriptor counted by :func:`keep_descriptor` was closed."""
    ThreadCounters._kept -= 1


def allowed_cpus(pid, tid, root='/proc'):
    """The CPUs a thread may run on, as the kernel has it, or None.

    ``Cpus_allowed_list`` of its status: its affinity within its cpuset.
    None where the file has no such line.
    """
    path = '%s/%d/task/%d/status' % (root, pid, tid)
    # Read for every vCPU of a share of the guests on each tick: bytes,
    # without a text file object.
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = b''
        while True:
            more = os.read(fd, 8192)
            if not more:
                break
            data += more
    finally:
        os.close(fd)
    # Found, not split into its fifty-odd lines.
    at = data.find(b'\nCpus_allowed_list:')
    if at < 0:
        if not data.startswith(b'Cpus_allowed_list:'):
            return None
        at = -1
    start = at + len(b'\nCpus_allowed_list:')
    end = data.find(b'\n', start)
    return _cpu_list(data[start:end if end >= 0 else len(data)].strip()
                     .decode())


@functools.lru_cache(maxsize=1024)
def _cpu_list(text):
    return cpuset.parse_cpuset(text)
