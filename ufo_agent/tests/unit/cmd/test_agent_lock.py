"""One ufo-agent per host, whatever its configuration.

A second agent (or --restore) is refused while one runs, also with a
configuration file and a state directory of its own: the lock is
host-wide, at a place no option moves. The refusal comes before
anything touches libvirt: these tests fail if the driver is built.
"""

import subprocess
import sys
import textwrap
import types

import pytest

from ufo_agent.cmd import agent

HOLDER = textwrap.dedent('''
    import sys, time
    from ufo_agent.service import pidlock
    pidlock.HOST_LOCK_DIR = sys.argv[1]
    lock = pidlock.acquire()
    print('locked', flush=True)
    time.sleep(60)
''')


def _conf(path, state):
    path.write_text('[agent]\nstate_path = %s\n[host_cpus]\n'
                    'managed_cpus = 0-7\nnova_config =\nnova_config_dir =\n'
                    % state)
    return path


@pytest.fixture
def main(agent_main_state, eight_cpu_host, tmp_path, monkeypatch, capsys):
    """``ufo-agent`` on a host with 8 CPUs; returns (rc, stderr)."""
    def no_driver(*args, **kwargs):
        pytest.fail('libvirt was touched while another agent runs')

    monkeypatch.setattr(agent, '_driver', lambda: types.SimpleNamespace(
        LibvirtDriver=no_driver))
    monkeypatch.setattr(agent, 'RESTORE_LOCK_WAIT', 0.3)
    conf = _conf(tmp_path / 'ufo-agent.conf', tmp_path / 'state')

    def run(*extra, config=conf):
        rc = agent.main(['--config-file', str(config), '--log-file',
                         str(tmp_path / 'agent.log')] + list(extra))
        return rc, capsys.readouterr().err

    return run


@pytest.fixture
def running(host_lock_dir):
    """Another agent's process, holding the host-wide lock."""
    proc = subprocess.Popen([sys.executable, '-c', HOLDER,
                             str(host_lock_dir)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == 'locked'
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_second_agent_exits_naming_the_pid_and_the_lock(
        main, running, host_lock_dir):
    rc, err = main()
    assert rc == agent.EXIT_FAILURE
    assert ('ufo-agent: another ufo-agent (pid %d) is running on this host: '
            'it holds %s' % (running.pid, host_lock_dir /
                             'ufo-agent.lock')) in err
    assert running.poll() is None


def test_another_configuration_and_state_directory_do_not_escape_the_lock(
        main, running, tmp_path, host_lock_dir):
    other = _conf(tmp_path / 'other.conf', tmp_path / 'other-state')
    rc, err = main(config=other)
    assert rc == agent.EXIT_FAILURE
    assert 'another ufo-agent (pid %d) is running on this host' % (
        running.pid) in err
    assert str(host_lock_dir / 'ufo-agent.lock') in err
    assert running.poll() is None


def test_restore_is_refused_while_an_agent_runs(main, running, host_lock_dir):
    rc, err = main('--restore')
    assert rc == agent.EXIT_FAILURE
    assert ('not restoring: ufo-agent (pid %d) is running and holds %s'
            % (running.pid, host_lock_dir / 'ufo-agent.lock')) in err


def test_once_the_holder_is_gone_the_agent_goes_on_to_libvirt(
        main, running):
    running.kill()
    running.wait()
    with pytest.raises(pytest.fail.Exception, match='libvirt was touched'):
        main()


def test_a_lock_that_cannot_be_taken_is_named(main, host_lock_dir):
    # Not a directory: no lock can be made there, even by root.
    host_lock_dir.write_text('')
    rc, err = main()
    assert rc == agent.EXIT_FAILURE
    assert 'cannot take the host-wide lock %s' % (
        host_lock_dir / 'ufo-agent.lock') in err
    assert 'RuntimeDirectory=ufo-agent' in err
