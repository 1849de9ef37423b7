"""/proc readers, on a fake tree and on this very process."""

import os
import threading
import time

import pytest

from ufo_agent.hypervisor import procfs


def _task(root, pid, tid, comm, stat='100 20 3\n'):
    path = root / str(pid) / 'task' / str(tid)
    path.mkdir(parents=True)
    (path / 'comm').write_text(comm + '\n')
    (path / 'schedstat').write_text(stat)


def _process(root, pid, comm, flags=0x400000):
    """A process of its own: a kernel thread with PF_KTHREAD in flags."""
    path = root / str(pid)
    (path / 'task' / str(pid)).mkdir(parents=True)
    for where in (path, path / 'task' / str(pid)):
        (where / 'comm').write_text(comm + '\n')
        (where / 'stat').write_text(
            '%d (%s) S 2 0 0 0 -1 %d 0 0 0 0 0 0 0 0 20 0 1 0 77 0\n'
            % (pid, comm, flags))


def test_qemu_threads_are_split_into_vcpus_and_the_rest(tmp_path):
    _task(tmp_path, 500, 500, 'qemu-system-x86')
    _task(tmp_path, 500, 501, 'CPU 0/KVM', '7000 30 12\n')
    _task(tmp_path, 500, 502, 'CPU 1/TCG')
    _task(tmp_path, 500, 503, 'IO iothread1')
    _task(tmp_path, 500, 504, 'worker')
    for pid, comm in ((900, 'vhost-500'), (901, 'vhost-5000'),
                      (902, 'kworker/0:1')):
        _process(tmp_path, pid, comm, procfs.PF_KTHREAD)
    (tmp_path / 'self').mkdir()
    threads = procfs.qemu_threads(500, root=str(tmp_path))
    assert threads.vcpus == {0: 501, 1: 502}
    assert threads.others == (500, 503, 504)
    assert threads.vhost == ((900, 900),)
    assert threads.tids == {500, 501, 502, 503, 504}
    stat = procfs.schedstat(500, 501, root=str(tmp_path))
    assert stat == procfs.SchedStat(7000, 30, 12)


def test_vhost_workers_are_told_by_kernel_facts_not_by_name(tmp_path):
    _task(tmp_path, 500, 500, 'qemu-system-x86')
    _task(tmp_path, 500, 501, 'CPU 0/KVM')
    _task(tmp_path, 500, 502, 'worker')
    # Linux 6.4 on: a user worker of QEMU itself, named after the QEMU
    # thread (502) that set the device up.
    _task(tmp_path, 500, 503, 'vhost-502')
    # Before: kernel threads, named after a thread of QEMU...
    _process(tmp_path, 900, 'vhost-502', procfs.PF_KTHREAD | 0x40)
    # ... and never a user's process, of whatever name.
    _process(tmp_path, 950, 'vhost-500')
    _process(tmp_path, 951, 'vhost-502', 0x40)
    # A kernel thread of another QEMU.
    _process(tmp_path, 960, 'vhost-600', procfs.PF_KTHREAD)
    threads = procfs.qemu_threads(500, root=str(tmp_path))
    assert threads.vhost == ((500, 503), (900, 900))
    assert threads.others == (500, 502)
    assert procfs.vhost_kernel_threads(str(tmp_path)) == {
        502: (900,), 600: (960,)}


def test_stat_lines_are_parsed_whatever_the_name():
    line = ('77 (a) b (c)) S 1 77 77 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 '
            '0 4242 0\n')
    assert procfs.parse_stat(line) == procfs.Stat('a) b (c)', 2129984,
                                                  4242)
    with pytest.raises(ValueError):
        procfs.parse_stat('77 (short) S 1\n')
    # This process is no kernel thread.
    me = procfs.parse_stat(open('/proc/self/stat').read())
    assert not me.flags & procfs.PF_KTHREAD
    assert procfs.start_time(os.getpid()) == procfs.start_time(
        os.getpid()) > 0


def test_allowed_cpus_are_the_kernels(tmp_path):
    assert procfs.allowed_cpus(os.getpid(), threading.get_native_id()) \
        == os.sched_getaffinity(0)
    _task(tmp_path, 500, 501, 'CPU 0/KVM')
    (tmp_path / '500' / 'task' / '501' / 'status').write_text(
        'Name:\tCPU 0/KVM\nCpus_allowed_list:\t2-3,6\n')
    assert procfs.allowed_cpus(500, 501, str(tmp_path)) == {2, 3, 6}


def test_allowed_cpus_line_anywhere_or_absent(tmp_path):
    _task(tmp_path, 500, 501, 'CPU 0/KVM')
    status = tmp_path / '500' / 'task' / '501' / 'status'
    for text, cpus in (
            ('Cpus_allowed_list:\t4\nCpus_allowed:\tff\n', {4}),
            ('Name:\tx\nCpus_allowed:\t30\nCpus_allowed_list:\t4-5',
             {4, 5}),
            ('Name:\tx\nCpus_allowed:\t30\n', None)):
        status.write_text(text)
        assert procfs.allowed_cpus(500, 501, str(tmp_path)) == cpus


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


def _open_fds():
    return len(os.listdir('/proc/self/fd'))


def test_kept_schedstat_files_read_the_thread_anew_until_it_exits():
    pid = os.getpid()
    ready, stop, spin = threading.Event(), threading.Event(), [0]

    def work():
        ready.set()
        while not stop.is_set():
            spin[0] += 1
    worker = threading.Thread(target=work)
    worker.start()
    ready.wait()
    tid = worker.native_id
    counters = procfs.ThreadCounters()
    try:
        before = counters.read(pid, tid)
        fds = _open_fds()
        time.sleep(0.1)
        after = counters.read(pid, tid)
        # The same descriptor, read again from its start: the kernel
        # wrote the thread's counters anew.
        assert _open_fds() == fds
        assert after.cpu_ns > before.cpu_ns
        stop.set()
        worker.join()
        # join() returns before the kernel has reaped the task.
        deadline = time.monotonic() + 10
        while os.path.exists('/proc/self/task/%d' % tid):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        # An exited thread's descriptor never reads as another thread.
        with pytest.raises(FileNotFoundError):
            counters.read(pid, tid)
    finally:
        stop.set()
        counters.close()


def test_threads_no_longer_read_have_their_files_closed():
    pid = os.getpid()
    counters = procfs.ThreadCounters()
    fds = _open_fds()
    counters.read(pid, pid)
    counters.read(pid, threading.get_native_id())
    assert _open_fds() == fds + 1       # the main thread's, read twice
    counters.keep({(pid, pid)})
    assert _open_fds() == fds + 1
    counters.keep(())
    assert _open_fds() == fds
    counters.close()


def test_past_the_descriptor_budget_files_are_read_and_closed(monkeypatch):
    monkeypatch.setattr(procfs, '_most_kept', lambda: 0)
    counters = procfs.ThreadCounters()
    fds = _open_fds()
    assert counters.read(os.getpid(), os.getpid()).cpu_ns > 0
    assert _open_fds() == fds


def test_totals_sum_the_threads_and_name_those_gone():
    pid = os.getpid()
    counters = procfs.ThreadCounters()
    try:
        gone = (pid, 2 ** 22 + 7)
        cpu, wait, slices, missing = counters.totals([(pid, pid), gone])
        after = counters.read(pid, pid)
        assert 0 < cpu <= after.cpu_ns and 0 <= wait <= after.wait_ns
        assert 0 < slices <= after.slices
        assert missing == [gone]
        assert counters.totals([(pid, pid)])[3] is None
    finally:
        counters.close()
