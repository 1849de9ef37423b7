"""The e2e harness reads /status before the agent's first tick (``{}``).

A functional test once failed with ``KeyError: 'vms'`` on a fresh
machine: the harness polled the agent before its first tick. These tests
poll the agent's real status endpoint, first empty, then populated.
"""

import pytest

from ufo_agent.cmd import status as status_cmd
from ufo_agent.service import metrics
from ufo_tools import e2e

STATUS = {
    'ticks': 3, 'tick_seconds': 0.002, 'dry_run': False, 'cores_saved': 1,
    'pools': {'managed_cores': 2, 'vcpu_cores': 1, 'emulator_cores': 0,
              'emulator_util': 0.1, 'idle_cores': 1, 'overloaded': False,
              'shortfall_cores': 0},
    'vms': [{'uuid': 'u-1', 'name': 'web', 'mode': 'active',
             'signal': 'guest', 'cores': 1, 'wanted_cores': 1,
             'online_vcpus': 1, 'target_vcpus': 2, 'channel': 'proven',
             'vcpus': 2, 'util': 40.0, 'sf': 120.0,
             'r2': None, 'reason': '', 'note': ''}],
}


class _Running:
    """A stand-in for the agent's Popen: alive."""

    returncode = None

    def poll(self):
        return None


@pytest.fixture
def agent(tmp_path):
    server = metrics.MetricsServer('127.0.0.1', 0)
    server.start()
    proc = e2e.AgentProcess(tmp_path)
    proc.port = server.address[1]
    proc.proc = _Running()
    proc.server = server
    yield proc
    server.stop()


def test_vm_status_of_an_empty_status_is_none():
    assert e2e.vm_status({}, 'u-1') is None
    assert e2e.vm_status(None, 'u-1') is None
    assert e2e.vm_status({'vms': []}, 'u-1') is None


def test_vm_status_finds_the_guest():
    assert e2e.vm_status(STATUS, 'u-1')['name'] == 'web'
    assert e2e.vm_status(STATUS, 'u-2') is None


def test_ticked():
    assert e2e.ticked({}) is None
    assert e2e.ticked(STATUS) is STATUS


def test_before_the_first_tick_there_is_no_data(agent):
    assert agent.server.snapshot == {}
    assert agent.poll() is None
    assert e2e.vm_status(agent.poll(), 'u-1') is None
    seen = []
    with pytest.raises(e2e.AgentFailed, match='no tick yet'):
        # The predicate never sees the empty answer.
        agent.wait(lambda s: seen.append(s) or s['pools'], timeout=0.6)
    assert seen == []
    with pytest.raises(e2e.AgentFailed, match='the first tick'):
        agent.status(timeout=0.6)


def test_after_the_first_tick_the_status_is_read(agent):
    agent.server.snapshot = STATUS
    assert agent.poll() == STATUS
    assert agent.status()['ticks'] == 3
    got = agent.wait(lambda s: e2e.vm_status(s, 'u-1')['mode'] == 'active',
                     timeout=5)
    assert got['pools']['idle_cores'] == 1


def test_ufo_status_before_the_first_tick(agent, tmp_path, capsys):
    conf = tmp_path / 'ufo-agent.conf'
    conf.write_text('[agent]\nmetrics_port = %d\n' % agent.port)
    argv = ['--config-file', str(conf)]
    assert status_cmd.format_status({}) == status_cmd.NO_DATA
    assert status_cmd.main(argv) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.strip() == status_cmd.NO_DATA
    agent.server.snapshot = STATUS
    assert status_cmd.main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert 'pools: managed 2' in out and 'web' in out


def test_a_timeout_names_pools_and_guests_on_its_first_line(agent):
    # CI summaries keep a failure's first line only.
    agent.server.snapshot = dict(STATUS, config={'agent': {'x': 1}})
    with pytest.raises(e2e.AgentFailed) as failed:
        agent.wait(lambda s: False, timeout=0.6, what='the pool to shrink')
    first = str(failed.value).splitlines()[0]
    assert first.startswith(
        'timeout waiting for the pool to shrink; last pools')
    assert "'emulator_util': 0.1" in first
    # Cores held/wanted, vCPUs online/target, signal/acknowledgements.
    assert 'web active cores=1/1 vcpus=1/2 util=40.0 guest/proven' in first
    assert 'config' not in first


def test_why_exited_names_the_exception_of_the_last_traceback():
    output = '\n'.join([
        'Starting libvirtd and building the test guest ...',
        'Traceback (most recent call last):',
        '  File "run.py", line 1, in <module>',
        'OSError: first',
        '',
        'During handling of the above exception, another exception occurred:',
        '',
        'Traceback (most recent call last):',
        '  File "run.py", line 2, in <module>',
        '    console.sh(cmd)',
        'TimeoutError: killall ufo-workload: no answer on the guest console',
        'last lines:',
        'UFO-WL p99_us=100'])
    assert e2e.why_exited(1, output) == (
        'exited with 1: TimeoutError: killall ufo-workload: no answer on '
        'the guest console')


def test_why_exited_without_a_traceback_gives_the_last_line():
    assert e2e.why_exited(1, 'booting\nNova\'s pins back: NO\n\n') == (
        'exited with 1: Nova\'s pins back: NO')
    assert e2e.why_exited(-9, '') == 'exited with -9: no output'
