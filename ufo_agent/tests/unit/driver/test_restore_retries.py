"""``ufo-agent --restore`` rides out libvirt failing, within its budget.

The unit's fail-safe runs when things go wrong, libvirtd restarting
among them. Over the libvirt driver and a fake libvirt: a failed
connection, listing or pin call is tried again until every guest is
back; what cannot be given back in time is named, with status 1 and no
traceback.
"""

import functools
import types

import pytest

from ufo_agent.cmd import agent
from ufo_agent.tests.unit.cmd.conftest import agent_main_state  # noqa
from ufo_agent.tests.unit.cmd.conftest import eight_cpu_host  # noqa
from ufo_agent.tests.unit.driver import conftest as driver_conftest
from ufo_tools.fakes.fakehost import nova_xml
from ufo_tools.fakes import fakelibvirt as lv

WEB = '8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d'
DB = '3b7e0a52-6c1d-4f0e-a9b8-7d6c5b4a3f2e'
NAMES = {WEB: 'instance-00000001', DB: 'instance-00000002'}
SERVERS = {WEB: 'web', DB: 'db'}
ALL = frozenset(range(8))


def _pins(dom):
    vcpus = frozenset(i for bits in dom.vcpu_pins.values()
                      for i, on in enumerate(bits) if on)
    emulator = frozenset(i for i, on in enumerate(dom.emulator_pin) if on)
    return vcpus, emulator


@pytest.fixture
def restore(agent_main_state, eight_cpu_host, host, tmp_path,  # noqa
            monkeypatch, capsys):
    """Two guests on pins an agent narrowed; ``run()``: (rc, stderr)."""
    doms = {}
    for pid, uuid in enumerate((WEB, DB), start=500):
        doms[uuid] = host.boot(uuid, nova_xml(uuid, name=NAMES[uuid],
                                              server=SERVERS[uuid], vcpus=2,
                                              cpuset='0-7'),
                               pid=pid, vcpus=2, name=NAMES[uuid])
        # Where the agent that died left them: one core each.
        cpu = 2 if uuid == WEB else 4
        doms[uuid].vcpu_pins = {i: tuple(c == cpu for c in range(8))
                                for i in range(2)}
        doms[uuid].emulator_pin = tuple(c == 6 for c in range(8))
    monkeypatch.setattr(agent, '_driver', lambda: types.SimpleNamespace(
        LibvirtDriver=functools.partial(
            driver_conftest.DRIVER_CLASS, run_dir=str(host.run),
            proc_root=str(host.proc), sysfs_root=str(host.sysfs))))
    monkeypatch.setattr(agent, 'RESTORE_BUDGET', 2.0)
    monkeypatch.setattr(agent, 'RESTORE_RETRY_PAUSE', 0.05)

    def run():
        conf = tmp_path / 'ufo-agent.conf'
        conf.write_text('[agent]\nstate_path = %s\n[host_cpus]\n'
                        'managed_cpus = 0-7\nnova_config =\n'
                        'nova_config_dir =\n[channel]\nshm_dir = %s\n'
                        '[publishers]\nenabled =\n'
                        % (tmp_path / 'state', host.shm))
        rc = agent.main(['--config-file', str(conf), '--log-file',
                         str(tmp_path / 'agent.log'), '--restore'])
        return rc, capsys.readouterr().err

    return doms, run


def _failing(monkeypatch, cls, method, times, error):
    """``cls.method`` raises ``error`` on its first ``times`` calls."""
    real = getattr(cls, method)
    calls = []

    def wrapper(*args, **kwargs):
        calls.append(args)
        if len(calls) <= times:
            raise error
        return real(*args, **kwargs)
    monkeypatch.setattr(cls, method, wrapper)
    return calls


def test_a_listing_that_fails_is_tried_again_and_every_guest_comes_back(
        restore, monkeypatch, tmp_path):
    doms, run = restore
    _failing(monkeypatch, lv.FakeConnection, 'listAllDomains', 3,
             lv.libvirtError('Cannot recv data: Connection reset by peer'))
    rc, err = run()
    assert (rc, err) == (0, '')
    for dom in doms.values():
        assert _pins(dom) == (ALL, ALL)
    log = (tmp_path / 'agent.log').read_text()
    assert 'trying again' in log and 'Traceback' not in log


def test_a_connection_refused_at_first_is_tried_again(
        restore, host, monkeypatch):
    doms, run = restore
    _failing(monkeypatch, host.hv.__class__, 'open', 2,
             lv.libvirtError('Failed to connect socket: Connection refused'))
    rc, err = run()
    assert (rc, err) == (0, '')
    for dom in doms.values():
        assert _pins(dom) == (ALL, ALL)


def test_a_pin_call_that_fails_once_is_tried_again(restore, monkeypatch):
    doms, run = restore
    doms[DB].fail['pinVcpuFlags'] = lv.libvirtError('Timed out during '
                                                    'operation')

    real = lv.FakeDomain._maybe_fail

    def once(dom, method):
        try:
            real(dom, method)
        finally:
            if method == 'pinVcpuFlags':
                dom.fail.pop(method, None)
    monkeypatch.setattr(lv.FakeDomain, '_maybe_fail', once)
    rc, err = run()
    assert (rc, err) == (0, '')
    for dom in doms.values():
        assert _pins(dom) == (ALL, ALL)


def test_a_listing_that_never_works_exits_1_with_a_clear_message(
        restore, host, tmp_path):
    doms, run = restore
    host.hv.list_error = lv.libvirtError('internal error: libvirtd is '
                                         'shutting down')
    rc, err = run()
    assert rc == 1
    assert err.startswith('ufo-agent: restore failed: could not list the '
                          'guests within 2 s, no guest was given back')
    assert 'libvirtd is shutting down' in err
    assert 'Traceback' not in err + (tmp_path / 'agent.log').read_text()


def test_every_guest_that_can_be_is_given_back_the_others_are_named(
        restore, tmp_path):
    doms, run = restore
    doms[DB].fail['pinVcpuFlags'] = lv.libvirtError('QEMU monitor gone')
    rc, err = run()
    assert rc == 1
    assert _pins(doms[WEB]) == (ALL, ALL)
    assert err.startswith('ufo-agent: restore failed: could not give 1 '
                          'guest(s) back within 2 s (1 given back): ')
    assert '%s (db): ' % DB in err and 'QEMU monitor gone' in err
    assert WEB not in err
    assert 'Traceback' not in (tmp_path / 'agent.log').read_text()
