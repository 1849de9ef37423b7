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
