"""QEMU's task list is listed again only when it changed.

Every guest is observed on every tick: a directory listing of its task
list each time cost more than the rest of its /proc reads. The task
directory's link count and modification time tell a change; a thread
that exits as another starts (the count unchanged) is told by its
schedstat, which the kernel answers with ESRCH once the thread is gone
(emulated here for the fake /proc's files).
"""

import errno
import os
import shutil

import pytest

from ufo_agent.hypervisor import procfs
from ufo_tools.fakes.fakehost import nova_xml

U1 = '8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d'
PID = 500


@pytest.fixture
def guest(host, hv, monkeypatch):
    host.boot(U1, nova_xml(U1, cpuset='0-7'), pid=PID, vcpus=2)
    driver = host.driver()
    driver.guests()
    listed = []
    real_listdir = os.listdir

    def listdir(path='.'):
        if str(path).endswith('/task'):
            listed.append(path)
        return real_listdir(path)
    monkeypatch.setattr(os, 'listdir', listdir)
    return driver, listed


def test_an_unchanged_task_list_is_not_listed_again(guest):
    driver, listed = guest
    for _ in range(2):          # new, then its names read once more
        driver.observe(U1)
    del listed[:]
    for _ in range(5):
        driver.observe(U1)
    # One listing an observation before.
    assert listed == []


def test_a_thread_that_exits_as_another_starts_is_seen_at_once(
        guest, host, monkeypatch):
    driver, listed = guest
    for _ in range(2):
        driver.observe(U1)
    assert driver.observe(U1).vcpu_slices == 6
    task = host.proc / str(PID) / 'task'
    before = os.stat(task)
    # vCPU 1 (unplugged and plugged back) runs as a new thread.
    old = task / str(PID + 2)
    for name in ('comm', 'schedstat'):
        (old / name).unlink()
    old.rmdir()
    new = task / '900'
    new.mkdir()
    (new / 'comm').write_text('CPU 1/KVM\n')
    (new / 'schedstat').write_text('5000 0 40\n')
    # The same count and time: only the dead thread's schedstat tells.
    os.utime(task, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(task).st_nlink == before.st_nlink
    real_pread = os.pread

    def pread(fd, size, offset):
        if os.readlink('/proc/self/fd/%d' % fd).endswith(' (deleted)'):
            raise ProcessLookupError(errno.ESRCH, 'No such process')
        return real_pread(fd, size, offset)
    monkeypatch.setattr(procfs.os, 'pread', pread)
    obs = driver.observe(U1)
    assert obs.vcpu_slices == 3 + 40
    assert driver._guests[U1].threads().vcpus == {0: PID + 1, 1: 900}


def test_an_unchanged_task_list_is_watched_without_a_path_lookup(
        guest, monkeypatch):
    driver, _ = guest
    for _ in range(2):
        driver.observe(U1)
    looked_up = []
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        if str(path).endswith('/task'):
            looked_up.append(path)
        return real_stat(path, *args, **kwargs)
    monkeypatch.setattr(os, 'stat', stat)
    for _ in range(5):
        driver.observe(U1)
    # A stat of the task directory by path an observation before.
    assert looked_up == []


def test_a_task_directory_made_anew_is_the_one_watched(guest, host):
    driver, listed = guest
    for _ in range(2):
        driver.observe(U1)
    task = host.proc / str(PID) / 'task'
    # The process is gone, its directory with it, and a new process of
    # the same pid has one of its own: its threads are the new one's,
    # then and after.
    shutil.rmtree(task)
    task.mkdir()
    for tid, name in ((PID, 'qemu-kvm'), (PID + 1, 'CPU 0/KVM'),
                      (700, 'CPU 1/KVM')):
        (task / str(tid)).mkdir()
        (task / str(tid) / 'comm').write_text(name + '\n')
        (task / str(tid) / 'schedstat').write_text('1000 0 7\n')
    assert driver._guests[U1].threads().vcpus == {0: PID + 1, 1: 700}
    del listed[:]
    (task / '701').mkdir()
    (task / '701' / 'comm').write_text('CPU 2/KVM\n')
    (task / '701' / 'schedstat').write_text('1000 0 7\n')
    assert driver._guests[U1].threads().vcpus == {0: PID + 1, 1: 700,
                                                  2: 701}
    assert listed


def test_closing_a_guest_closes_its_task_directory(guest):
    driver, _ = guest
    driver.observe(U1)
    known = driver._guests[U1]
    fd = known._task_fd
    assert fd is not None
    known.close()
    with pytest.raises(OSError):
        os.fstat(fd)


def test_the_task_directory_is_kept_open_within_the_proc_budget(
        guest, monkeypatch):
    driver, listed = guest
    known = driver._guests[U1]
    known.close()
    kept = procfs.ThreadCounters._kept
    monkeypatch.setattr(procfs, '_most_kept', lambda: 0)
    for _ in range(3):
        obs = driver.observe(U1)
    # The budget spent: no descriptor, the list still watched by path.
    assert known._task_fd is None
    assert procfs.ThreadCounters._kept == kept
    assert obs.vcpu_slices and len(listed) <= 3
    monkeypatch.setattr(procfs, '_most_kept', lambda: 1 << 16)
    driver.observe(U1)
    assert known._task_fd is not None
    with_it = procfs.ThreadCounters._kept
    known._close_task_dir()
    assert procfs.ThreadCounters._kept == with_it - 1
    known.close()
    assert procfs.ThreadCounters._kept == kept
