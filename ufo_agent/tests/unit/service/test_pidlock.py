"""One ufo-agent per host: an exclusive flock on a file."""

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


def test_the_default_is_the_host_wide_lock(host_lock_dir):
    assert pidlock.host_lock_path() == str(host_lock_dir / 'ufo-agent.lock')
    with pidlock.acquire() as lock:
        assert lock.path == pidlock.host_lock_path()
        assert pidlock.holder(lock.path) == os.getpid()
        with pytest.raises(pidlock.Locked):
            pidlock.acquire()
    # Only the agent's user may enter: nobody else can hold it.
    assert host_lock_dir.stat().st_mode & 0o777 == 0o700


def test_no_option_moves_the_host_lock():
    from ufo_agent.cmd import agent as cmd
    from ufo_agent.conf import opts
    names = [opt.dest for _, group in opts.list_opts() for opt in group]
    names += [opt.dest for opt in cmd.CLI_OPTS]
    assert not [n for n in names if 'lock' in n or 'run_dir' in n]


def test_a_file_this_user_may_not_write_is_locked_read_only(
        tmp_path, monkeypatch):
    """As after an agent run as root: the lock holds, the pid is kept."""
    path = tmp_path / 'ufo-agent.lock'
    path.write_text('')
    real_open = os.open

    def open_(name, flags, *args):
        if name == str(path) and flags & os.O_RDWR:
            raise PermissionError(13, 'Permission denied', name)
        return real_open(name, flags, *args)

    monkeypatch.setattr(os, 'open', open_)
    lock = pidlock.acquire(str(tmp_path))
    monkeypatch.undo()
    try:
        with pytest.raises(pidlock.Locked):
            pidlock.acquire(str(tmp_path))
        assert path.read_text() == ''
    finally:
        lock.release()
    pidlock.acquire(str(tmp_path)).release()
