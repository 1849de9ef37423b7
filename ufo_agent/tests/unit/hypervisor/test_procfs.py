"""/proc readers, on a fake tree and on this very process."""

import os
import threading

import pytest

from ufo_agent.hypervisor import procfs


def _task(root, pid, tid, comm, stat='100 20 3\n'):
    path = root / str(pid) / 'task' / str(tid)
    path.mkdir(parents=True)
    (path / 'comm').write_text(comm + '\n')
    (path / 'schedstat').write_text(stat)


def test_qemu_threads_are_split_into_vcpus_and_the_rest(tmp_path):
    _task(tmp_path, 500, 500, 'qemu-system-x86')
    _task(tmp_path, 500, 501, 'CPU 0/KVM', '7000 30 12\n')
    _task(tmp_path, 500, 502, 'CPU 1/TCG')
    _task(tmp_path, 500, 503, 'IO iothread1')
    _task(tmp_path, 500, 504, 'worker')
    for pid, comm in ((900, 'vhost-500'), (901, 'vhost-5000'),
                      (902, 'kworker/0:1')):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / 'comm').write_text(comm + '\n')
    (tmp_path / 'self').mkdir()
    threads = procfs.qemu_threads(500, root=str(tmp_path))
    assert threads.vcpus == {0: 501, 1: 502}
    assert threads.others == (500, 503, 504)
    assert threads.vhost == (900,)
    stat = procfs.schedstat(500, 501, root=str(tmp_path))
    assert stat == procfs.SchedStat(7000, 30, 12)


def test_schedstat_of_this_process_is_real_and_monotonic():
    pid = os.getpid()
    before = procfs.schedstat(pid)
    stop = threading.Event()
    worker = threading.Thread(target=lambda: stop.wait(0.2))
    worker.start()
    sum(i * i for i in range(200000))
    worker.join()
    after = procfs.schedstat(pid)
    assert after.cpu_ns > before.cpu_ns and after.slices >= before.slices
    threads = procfs.qemu_threads(pid)
    assert pid in threads.others and threads.vcpus == {}


def test_gone_process_raises():
    with pytest.raises(OSError):
        procfs.qemu_threads(2 ** 22 + 7)
    with pytest.raises(ValueError):
        procfs.parse_schedstat('12 3')
