"""``ufo-agent --restore`` needs only libvirt, the CPUs and the lock.

A configuration mistake in what restore does not use (the controller,
the publishers' Placement credentials) must not keep the guests from
getting their CPUs back, and restore never creates or attaches a
channel. The driver is a recorder standing in for libvirt.
"""

import types

import pytest

from ufo_agent.cmd import agent
from ufo_agent.driver import base
from ufo_agent.publishers import placement

UUID = '8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d'


class RecordingDriver:
    made = []

    def __init__(self, uri, managed, **kwargs):
        self.kwargs = kwargs
        self.managed = managed
        self.released = []
        self.closed = False
        RecordingDriver.made.append(self)

    def guests(self):
        return [base.Guest(UUID, 'web', 2, 'lc', frozenset(range(8)),
                           frozenset(range(8)), True)]

    def release(self, uuid):
        self.released.append(uuid)

    def hostname(self):
        return 'compute-7.example.org'

    def close(self):
        self.closed = True


@pytest.fixture
def restore(agent_main_state, eight_cpu_host, tmp_path, monkeypatch,
            capsys):
    """``ufo-agent --restore`` on the given configuration: (rc, stderr)."""
    RecordingDriver.made = []
    monkeypatch.setattr(agent, '_driver', lambda: types.SimpleNamespace(
        LibvirtDriver=RecordingDriver))

    def run(text):
        conf = tmp_path / 'ufo-agent.conf'
        conf.write_text('[agent]\nstate_path = %s\n[host_cpus]\n'
                        'managed_cpus = 0-7\nnova_config =\n'
                        'nova_config_dir =\n%s'
                        % (tmp_path / 'state', text))
        rc = agent.main(['--config-file', str(conf), '--log-file',
                         str(tmp_path / 'agent.log'), '--restore'])
        return rc, capsys.readouterr().err

    return run


def _restored(tmp_path, lock_dir):
    [driver] = RecordingDriver.made
    assert driver.released == [UUID] and driver.closed
    assert driver.managed == frozenset(range(8))
    # Never a new channel: only a page already attached is used.
    assert driver.kwargs['attach_channels'] is False
    assert driver.kwargs['use_attached_channels'] is True
    # The lock was taken and given back.
    assert (lock_dir / 'ufo-agent.lock').exists()
    return (tmp_path / 'agent.log').read_text()


def test_broken_placement_section_does_not_stop_the_restore(
        restore, tmp_path, host_lock_dir):
    rc, err = restore('[publishers]\nenabled = placement\n'
                      '[placement]\nauth_type = no-such-plugin\n')
    assert (rc, err) == (0, '')
    log = _restored(tmp_path, host_lock_dir)
    assert 'Restored guest %s (web)' % UUID in log
    # The trait could not be cleared: said, not fatal.
    assert 'Could not clear trait %s' % placement.TRAIT in log


def test_bad_controller_options_do_not_stop_the_restore(restore, tmp_path,
                                                        host_lock_dir):
    rc, err = restore('[controller]\npcu_low = 0.9\npcu_high = 0.5\n')
    assert (rc, err) == (0, '')
    _restored(tmp_path, host_lock_dir)


def test_restore_clears_the_trait_after_the_guests(
        restore, tmp_path, monkeypatch, host_lock_dir):
    events = []

    def apply(self, wanted):
        assert RecordingDriver.made[0].released == [UUID]
        events.append((self.nodename, wanted))

    monkeypatch.setattr(placement, '_client', lambda conf: object())
    monkeypatch.setattr(placement.PlacementTraitPublisher, 'apply', apply)
    rc, _ = restore('[publishers]\nenabled = placement\nnodename = node7\n')
    assert rc == 0
    assert events == [('node7', False)]
    _restored(tmp_path, host_lock_dir)


def test_without_nodename_the_trait_is_cleared_on_libvirts_host_name(
        restore, tmp_path, monkeypatch, host_lock_dir):
    # The running agent names the node as Nova does, by libvirt's host
    # name; a restore that used the short hostname missed the provider.
    events = []
    monkeypatch.setattr(placement, '_client', lambda conf: object())
    monkeypatch.setattr(placement.PlacementTraitPublisher, 'apply',
                        lambda self, wanted: events.append(
                            (self.nodename, wanted)))
    rc, _ = restore('[publishers]\nenabled = placement\n')
    assert rc == 0
    assert events == [('compute-7.example.org', False)]
    _restored(tmp_path, host_lock_dir)


def test_no_placement_publisher_no_placement_call(
        restore, tmp_path, monkeypatch, host_lock_dir):
    monkeypatch.setattr(placement, '_client', lambda conf: pytest.fail(
        'Placement contacted without the placement publisher'))
    rc, _ = restore('[publishers]\nenabled =\n')
    assert rc == 0
    _restored(tmp_path, host_lock_dir)


def test_qemus_user_and_group_are_not_needed(restore, tmp_path, host_lock_dir):
    # Restore creates no page and gives none away: a wrong value cannot
    # keep the guests from their CPUs. They only say whose pages to use.
    rc, err = restore('[channel]\nqemu_user = ufo-no-such-user\n'
                      'qemu_group = ufo-no-such-group\n')
    assert (rc, err) == (0, '')
    _restored(tmp_path, host_lock_dir)
    [driver] = RecordingDriver.made
    assert (driver.kwargs['qemu_user'], driver.kwargs['qemu_group']) == (
        'ufo-no-such-user', 'ufo-no-such-group')
