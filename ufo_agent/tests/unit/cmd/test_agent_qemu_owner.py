"""``[channel] qemu_user`` and ``qemu_group``: checked at start, then used.

QEMU runs as libvirt-qemu:kvm on Debian and Ubuntu, as qemu:qemu on RHEL:
a user or group that does not exist stops the agent, naming the option,
before the lock is taken or libvirt is touched. (``--restore`` never needs
them: test_agent_restore.py.)
"""

import grp
import os
import pwd
import types

import pytest

from ufo_agent.cmd import agent

NOBODY = pwd.getpwnam('nobody')
NOGROUP = grp.getgrgid(NOBODY.pw_gid).gr_name


class DriverReached(Exception):
    pass


@pytest.fixture
def main(agent_main_state, eight_cpu_host, tmp_path, monkeypatch, capsys):
    """``ufo-agent`` on ``[channel]`` text: (rc, stderr, driver kwargs)."""
    made = []

    def driver(uri, managed, **kwargs):
        made.append(kwargs)
        raise DriverReached()

    monkeypatch.setattr(agent, '_driver', lambda: types.SimpleNamespace(
        LibvirtDriver=driver))

    def run(channel, *extra):
        conf = tmp_path / 'ufo-agent.conf'
        conf.write_text('[agent]\nstate_path = %s\n[host_cpus]\n'
                        'managed_cpus = 0-7\nnova_config =\n'
                        'nova_config_dir =\n[channel]\n%s'
                        % (tmp_path / 'state', channel))
        try:
            rc = agent.main(['--config-file', str(conf), '--log-file',
                             str(tmp_path / 'agent.log')] + list(extra))
        except DriverReached:
            rc = None
        return rc, capsys.readouterr().err, made

    return run


@pytest.mark.parametrize('extra', [(), ('--dry-run',)])
def test_a_qemu_user_that_does_not_exist_stops_the_agent(main, tmp_path,
                                                         host_lock_dir,
                                                         extra):
    rc, err, made = main('qemu_user = ufo-no-such-user\n', *extra)
    assert rc == agent.EXIT_CONFIG and made == []
    assert err.startswith('ufo-agent: [channel] qemu_user=ufo-no-such-user: '
                          'no such user')
    assert 'libvirt\'s qemu.conf' in err
    assert 'Cannot start: [channel] qemu_user=ufo-no-such-user' in (
        tmp_path / 'agent.log').read_text()
    # Refused before the lock.
    assert not (host_lock_dir / 'ufo-agent.lock').exists()


def test_a_qemu_group_that_does_not_exist_stops_the_agent(main):
    # As on a RHEL host without Debian's group, or the reverse.
    rc, err, made = main('qemu_group = ufo-no-such-group\n')
    assert rc == agent.EXIT_CONFIG and made == []
    assert err.startswith('ufo-agent: [channel] qemu_group=ufo-no-such-group'
                          ': no such group')


def test_the_configured_user_and_group_reach_the_driver(main):
    rc, err, [kwargs] = main('qemu_user = nobody\nqemu_group = %s\n'
                             % NOGROUP)
    assert rc is None, err
    assert (kwargs['qemu_user'], kwargs['qemu_group']) == ('nobody', NOGROUP)


def test_the_defaults_are_debians(main):
    rc, err, [kwargs] = main('')
    assert rc is None, err
    assert (kwargs['qemu_user'], kwargs['qemu_group']) == (
        'libvirt-qemu', 'kvm')


@pytest.fixture
def plain_user(monkeypatch):
    """This process as uid/gid 4321, in no supplementary group."""
    monkeypatch.setattr(os, 'geteuid', lambda: 4321)
    monkeypatch.setattr(os, 'getegid', lambda: 4321)
    monkeypatch.setattr(os, 'getgroups', lambda: [])


def test_a_plain_user_outside_the_configured_group_is_refused(
        main, plain_user):
    rc, err, made = main('qemu_user = nobody\nqemu_group = %s\n' % NOGROUP)
    assert rc == agent.EXIT_CONFIG and made == []
    assert err.startswith('ufo-agent: [channel] qemu_group=%s: ufo-agent '
                          'runs as uid 4321, which is not in group %s, the '
                          'group QEMU (nobody) runs as' % (NOGROUP, NOGROUP))


def test_a_plain_user_in_the_configured_group_starts(main, plain_user,
                                                     monkeypatch):
    gid = grp.getgrnam(NOGROUP).gr_gid
    monkeypatch.setattr(os, 'getgroups', lambda: [gid])
    rc, err, [kwargs] = main('qemu_user = nobody\nqemu_group = %s\n'
                             % NOGROUP)
    assert rc is None, err


def test_a_dry_run_does_not_need_the_group(main, plain_user):
    rc, err, made = main('qemu_user = nobody\nqemu_group = %s\n' % NOGROUP,
                         '--dry-run')
    assert rc is None, err


# Kolla-Ansible: QEMU runs as nova:nova of the nova_libvirt container,
# 42436:42436, ids that have no name on the host.
KOLLA_QEMU = 'qemu_user = 42436\nqemu_group = 42436\n'


def test_numeric_ids_without_a_name_on_the_host_start_the_agent(main):
    with pytest.raises(KeyError):
        pwd.getpwuid(42436)
    rc, err, [kwargs] = main(KOLLA_QEMU)
    assert rc is None, err
    assert (kwargs['qemu_user'], kwargs['qemu_group']) == ('42436', '42436')


def test_a_plain_user_outside_the_numeric_group_is_refused(main,
                                                           plain_user):
    rc, err, made = main(KOLLA_QEMU)
    assert rc == agent.EXIT_CONFIG and made == []
    assert err.startswith('ufo-agent: [channel] qemu_group=42436: ufo-agent '
                          'runs as uid 4321, which is not in group 42436')


def test_a_plain_user_with_the_numeric_group_starts(main, plain_user,
                                                    monkeypatch):
    # systemd's SupplementaryGroups=42436 (deploy/ansible, Kolla).
    monkeypatch.setattr(os, 'getgroups', lambda: [42436])
    rc, err, [kwargs] = main(KOLLA_QEMU)
    assert rc is None, err
