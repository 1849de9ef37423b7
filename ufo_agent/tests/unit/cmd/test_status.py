"""ufo-status finds the agent through the agent's own configuration file."""

import json
import socket

import pytest

from ufo_agent.cmd import status
from ufo_agent.service import metrics
from ufo_agent.tests.unit.service import test_metrics


def _conf_file(tmp_path, **options):
    path = tmp_path / 'ufo-agent.conf'
    lines = ['[DEFAULT]', 'debug = true', '[agent]']
    lines += ['%s = %s' % item for item in options.items()]
    # Sections of the agent that ufo-status does not read are ignored.
    lines += ['[controller]', 'tick_interval = 1.0']
    path.write_text('\n'.join(lines) + '\n')
    return str(path)


@pytest.fixture
def server():
    agent, _, _ = test_metrics._running_agent()
    server = metrics.MetricsServer('127.0.0.1', 0)
    server.snapshot = agent.snapshot
    server.start()
    yield server
    server.stop()


def _free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def test_reads_the_endpoint_from_the_agents_configuration(
        server, tmp_path, capsys):
    path = _conf_file(tmp_path, metrics_host='127.0.0.1',
                      metrics_port=server.address[1])
    assert status.main(['--config-file', path]) == 0
    table = capsys.readouterr().out
    assert 'pools: managed 8' in table
    assert 'name-a' in table and 'host-only' in table
    assert status.main(['--config-file', path, '--json']) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(
        json.dumps(server.snapshot))


def test_the_table_shows_each_guests_emulator_cpu():
    snap = {'ticks': 3, 'pools': {}, 'vms': [dict(
        name='web', uuid='12345678-aaaa', mode='active', signal='guest',
        cores=2, wanted_cores=2, online_vcpus=4, vcpus=4, util=180.0,
        emulator_pct=37.4, sf=5000.0, r2=None, reason='', note='')]}
    lines = status.format_status(snap).splitlines()
    header, row = lines[1].split(), lines[2].split()
    assert row[header.index('EMU%')] == '37'
    assert row[header.index('UTIL%')] == '180'


def test_the_default_file_is_the_units(server, tmp_path, monkeypatch,
                                       capsys):
    path = _conf_file(tmp_path, metrics_port=server.address[1])
    monkeypatch.setattr(status, 'DEFAULT_CONFIG_FILE', path)
    assert status.main([]) == 0
    assert 'pools: managed 8' in capsys.readouterr().out


def test_an_agent_that_does_not_answer_is_named_with_its_options(
        tmp_path, capsys):
    port = _free_port()
    path = _conf_file(tmp_path, metrics_port=port)
    assert status.main(['--config-file', path]) == 1
    err = capsys.readouterr().err
    assert 'cannot reach ufo-agent at http://127.0.0.1:%d/status' % port \
        in err
    assert '[agent] metrics_host and metrics_port of %s' % path in err


def test_a_disabled_endpoint_and_a_missing_file_are_explained(
        tmp_path, monkeypatch, capsys):
    path = _conf_file(tmp_path, metrics_port=0)
    assert status.main(['--config-file', path]) == 1
    assert '[agent] metrics_port is 0 in %s' % path in \
        capsys.readouterr().err
    missing = str(tmp_path / 'nowhere.conf')
    monkeypatch.setattr(status, 'DEFAULT_CONFIG_FILE', missing)
    assert status.main([]) == 2
    err = capsys.readouterr().err
    assert missing in err and '--config-file' in err
    bad = _conf_file(tmp_path, metrics_port='http')
    assert status.main(['--config-file', bad]) == 2
    assert 'metrics_port' in capsys.readouterr().err


@pytest.mark.parametrize('host,url', [
    ('127.0.0.1', 'http://127.0.0.1:9477/status'),
    ('0.0.0.0', 'http://127.0.0.1:9477/status'),
    ('::', 'http://[::1]:9477/status'),
    ('fd00::5', 'http://[fd00::5]:9477/status'),
    ('compute-1.example.org', 'http://compute-1.example.org:9477/status'),
])
def test_endpoint(host, url):
    conf = status.make_conf()
    conf([], default_config_files=[])
    conf.set_override('metrics_host', host, group='agent')
    assert status.endpoint(conf) == url


def test_held_cores_are_listed_with_their_guest_and_reason():
    snap = {'ticks': 3, 'pools': {}, 'vms': [], 'held': [
        {'owner': 'emulator', 'reason': 'calls hang', 'cores': [3]},
        {'owner': '1234-abcd', 'reason': 'not adopted', 'cores': [1, 2]}]}
    lines = status.format_status(snap).splitlines()
    assert 'held: cores 3 by the emulator threads of hung guests ' \
        '(calls hang)' in lines
    assert 'held: cores 1,2 by guest 1234-abcd (not adopted)' in lines
