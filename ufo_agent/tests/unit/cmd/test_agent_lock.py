"""A second ufo-agent (or --restore) is refused while one runs.

The refusal comes before anything touches libvirt: these tests fail if
the driver is built.
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
    lock = pidlock.acquire(sys.argv[1])
    print('locked', flush=True)
    time.sleep(60)
''')


@pytest.fixture
def main(agent_main_state, eight_cpu_host, tmp_path, monkeypatch, capsys):
    """``ufo-agent`` on a host with 8 CPUs; returns (rc, stderr)."""
    def no_driver(*args, **kwargs):
        pytest.fail('libvirt was touched while another agent runs')

    monkeypatch.setattr(agent, '_driver', lambda: types.SimpleNamespace(
        LibvirtDriver=no_driver))
    monkeypatch.setattr(agent, 'RESTORE_LOCK_WAIT', 0.3)
    conf = tmp_path / 'ufo-agent.conf'
    conf.write_text('[agent]\nstate_path = %s\n[host_cpus]\n'
                    'managed_cpus = 0-7\nnova_config =\nnova_config_dir =\n'
                    % (tmp_path / 'state'))

    def run(*extra):
        rc = agent.main(['--config-file', str(conf), '--log-file',
                         str(tmp_path / 'agent.log')] + list(extra))
        return rc, capsys.readouterr().err

    return run


@pytest.fixture
def running(tmp_path):
    """Another agent's process, holding the lock."""
    proc = subprocess.Popen([sys.executable, '-c', HOLDER,
                             str(tmp_path / 'state')],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == 'locked'
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_second_agent_exits_2_naming_the_pid_and_the_lock(
        main, running, tmp_path):
    rc, err = main()
    assert rc == 2
    assert ('ufo-agent: another ufo-agent (pid %d) is running on this host: '
            'it holds %s' % (running.pid, tmp_path / 'state' /
                             'ufo-agent.lock')) in err
    assert running.poll() is None


def test_restore_is_refused_while_an_agent_runs(main, running, tmp_path):
    rc, err = main('--restore')
    assert rc == 2
    assert ('not restoring: ufo-agent (pid %d) is running and holds %s'
            % (running.pid, tmp_path / 'state' / 'ufo-agent.lock')) in err


def test_once_the_holder_is_gone_the_agent_goes_on_to_libvirt(
        main, running):
    running.kill()
    running.wait()
    with pytest.raises(pytest.fail.Exception, match='libvirt was touched'):
        main()
