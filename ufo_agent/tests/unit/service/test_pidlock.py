"""One ufo-agent per host: the lock in [agent] state_path."""

import os
import subprocess
import sys
import textwrap

import pytest

from ufo_agent.service import pidlock

HOLDER = textwrap.dedent('''
    import sys, time
    from ufo_agent.service import pidlock
    lock = pidlock.acquire(sys.argv[1])
    print('locked', flush=True)
    time.sleep(60)
''')


@pytest.fixture
def holder(tmp_path):
    """Another process that holds the lock until killed."""
    proc = subprocess.Popen([sys.executable, '-c', HOLDER, str(tmp_path)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == 'locked'
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_second_process_is_refused_naming_the_holder(tmp_path, holder):
    with pytest.raises(pidlock.Locked) as info:
        pidlock.acquire(str(tmp_path))
    assert info.value.pid == holder.pid
    assert info.value.path == str(tmp_path / 'ufo-agent.lock')
    assert 'locked by pid %d' % holder.pid in str(info.value)


def test_the_kernel_releases_the_lock_of_a_killed_holder(tmp_path, holder):
    holder.kill()
    holder.wait()
    with pidlock.acquire(str(tmp_path)) as lock:
        assert pidlock.holder(lock.path) == os.getpid()


def test_waiting_takes_the_lock_once_the_holder_exits(tmp_path, holder):
    killer = subprocess.Popen(['sh', '-c', 'sleep 0.5; kill %d'
                               % holder.pid])
    try:
        lock = pidlock.acquire(str(tmp_path), wait=10.0)
        lock.release()
    finally:
        killer.wait()


def test_release_lets_the_next_one_in(tmp_path):
    lock = pidlock.acquire(str(tmp_path / 'new'))
    assert (tmp_path / 'new' / 'ufo-agent.lock').read_text() == \
        '%d\n' % os.getpid()
    lock.release()
    pidlock.acquire(str(tmp_path / 'new')).release()
