"""The files an operator installs: the systemd unit and the entry points."""

import configparser
import os
import re
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))


def test_systemd_unit_restores_guests_on_every_stop():
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read(os.path.join(TOP, 'etc', 'systemd', 'ufo-agent.service'))
    service = unit['Service']
    assert service['ExecStart'].split()[0].endswith('/ufo-agent')
    # ExecStopPost runs after a clean stop and after a failure alike.
    assert service['ExecStopPost'].endswith('--restore')
    assert service['KillSignal'] == 'SIGTERM'
    assert service['Restart'] == 'on-failure'
    assert service['StateDirectory'] == 'ufo-agent'


def test_systemd_unit_watches_the_agent_and_reloads_with_sighup():
    """A hung agent is killed (then restored); reload is SIGHUP."""
    from ufo_agent.service import settings
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read(os.path.join(TOP, 'etc', 'systemd', 'ufo-agent.service'))
    service = unit['Service']
    assert service['Type'] == 'notify'
    assert service['NotifyAccess'] == 'main'
    watchdog = float(service['WatchdogSec'])
    # Above the longest time without a tick the defaults allow.
    assert watchdog > settings.AgentSettings().liveness_window(1.0)
    assert service['ExecReload'] == '/bin/kill -HUP $MAINPID'
    assert service['ExecStopPost'].endswith('--restore')


def test_systemd_unit_does_not_restart_on_a_configuration_mistake():
    """A typo stops the agent for good; libvirt not answering yet does not."""
    from ufo_agent.cmd import agent
    service = dict(_unit_lines('Service'))
    assert service['Restart'] == 'on-failure'
    prevent = service['RestartPreventExitStatus'].split()
    assert str(agent.EXIT_CONFIG) in prevent
    assert str(agent.EXIT_FAILURE) not in prevent
    assert agent.EXIT_CONFIG != agent.EXIT_FAILURE


def test_console_scripts_are_declared():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(TOP, 'setup.cfg'))
    scripts = cfg['entry_points']['console_scripts']
    for name in ('ufo-agent', 'ufo-status', 'ufo-bench'):
        assert '%s = ' % name in scripts


def _unit_lines(section):
    """(key, value) of one section of the unit, repeated keys kept."""
    path = os.path.join(TOP, 'etc', 'systemd', 'ufo-agent.service')
    current, lines = None, []
    with open(path) as handle:
        for line in handle:
            line = line.strip()
            if line.startswith('['):
                current = line
            elif current == '[%s]' % section and '=' in line and \
                    not line.startswith('#'):
                key, value = line.split('=', 1)
                lines.append((key, value))
    return lines


def test_systemd_unit_runs_unprivileged_and_hardened():
    service = dict(_unit_lines('Service'))
    assert service['User'] == service['Group'] == 'ufo-agent'
    # ExecStopPost (--restore) runs as the same user: no '+' or '!'.
    assert service['ExecStopPost'].startswith('/')
    assert service['CapabilityBoundingSet'] == ''
    assert service['AmbientCapabilities'] == ''
    assert service['NoNewPrivileges'] == 'yes'
    assert service['ProtectSystem'] == 'strict'
    assert service['ReadWritePaths'] == '/dev/shm'
    for key in ('ProtectHome', 'PrivateTmp', 'ProtectKernelTunables',
                'ProtectKernelModules', 'PrivateDevices'):
        assert service[key] == 'yes', key
    assert set(service['RestrictAddressFamilies'].split()) == {
        'AF_UNIX', 'AF_INET', 'AF_INET6'}
    # The pages belong to ufo-agent and must outlive a restart.
    assert 'RemoveIPC' not in service and 'DynamicUser' not in service
    # QEMU's threads are read from /proc.
    assert 'ProtectProc' not in service and 'ProcSubset' not in service


def test_systemd_unit_and_sysusers_agree_on_the_groups():
    groups = set(dict(_unit_lines('Service'))['SupplementaryGroups'].split())
    assert groups == {'libvirt', 'kvm'}
    path = os.path.join(TOP, 'etc', 'systemd', 'ufo-agent-sysusers.conf')
    with open(path) as handle:
        entries = [line.split() for line in handle
                   if line.strip() and not line.startswith('#')]
    assert entries[0][:2] == ['u', 'ufo-agent']
    assert {e[2] for e in entries if e[:2] == ['m', 'ufo-agent']} == groups


def test_systemd_unit_works_with_libvirtd_and_virtqemud():
    unit = _unit_lines('Unit')
    after = set(' '.join(v for k, v in unit if k == 'After').split())
    assert {'libvirtd.service', 'virtqemud.service'} <= after
    # No hard dependency on either daemon: a host runs one or the other.
    for key, value in unit:
        if key in ('Wants', 'Requires', 'BindsTo', 'Requisite'):
            assert 'libvirtd' not in value and 'virtqemud' not in value


def test_systemd_unit_gives_the_agent_the_host_wide_lock_directory():
    service = dict(_unit_lines('Service'))
    # pidlock's own value, not the one unit tests point elsewhere.
    lock_dir = subprocess.run(
        [sys.executable, '-c', 'from ufo_agent.service import pidlock; '
         'print(pidlock.HOST_LOCK_DIR)'], capture_output=True, text=True,
        check=True, cwd=TOP).stdout.strip()
    assert lock_dir == '/run/' + service['RuntimeDirectory']
    # The agent's user's alone: nobody else can open and hold the lock.
    assert service['RuntimeDirectoryMode'] == '0700'
    # Never removed under an agent that holds it.
    assert service['RuntimeDirectoryPreserve'] == 'yes'


def test_systemd_unit_leaves_restore_its_whole_budget():
    from ufo_agent.cmd import agent
    service = dict(_unit_lines('Service'))
    assert float(service['TimeoutStopSec']) > (agent.RESTORE_BUDGET +
                                               agent.RESTORE_LOCK_WAIT)


def _sample_options(path):
    """{section: set of option names} of a generated sample file."""
    options, section = {}, None
    with open(path) as handle:
        for line in handle:
            line = line.strip()
            if line.startswith('[') and line.endswith(']'):
                section = line[1:-1]
                options.setdefault(section, set())
            elif line.startswith('#') and '=' in line and section:
                name = line[1:].split('=', 1)[0].strip()
                if name.isidentifier():
                    options[section].add(name)
    return options


def test_config_samples_list_every_option_of_the_code():
    """An operator copies these: a stale one hides options (tox -e genconfig).

    Only our own namespaces are compared: the oslo libraries' help text
    changes with their releases.
    """
    from ufo_agent.conf import opts as agent_opts
    from ufo_nova import conf as nova_conf
    for name, list_opts in (('ufo-agent', agent_opts.list_opts),
                            ('ufo-nova', nova_conf.list_opts)):
        sample = _sample_options(
            os.path.join(TOP, 'etc', 'ufo', '%s.conf.sample' % name))
        for group, opts in list_opts():
            group = getattr(group, 'name', group) or 'DEFAULT'
            for opt in opts:
                assert opt.dest in sample.get(group, ()), (
                    '%s.conf.sample lacks [%s] %s: run tox -e genconfig'
                    % (name, group, opt.dest))


def test_agent_sample_documents_the_messaging_options():
    """The notification publisher reads oslo.messaging's options."""
    sample = _sample_options(
        os.path.join(TOP, 'etc', 'ufo', 'ufo-agent.conf.sample'))
    assert 'transport_url' in sample['DEFAULT']
    assert 'driver' in sample['oslo_messaging_notifications']
    assert 'ssl' in sample['oslo_messaging_rabbit']


def test_the_guest_module_and_its_dkms_package_have_one_version():
    # The version says which guests can publish a latency (1.1.0 on).
    src = os.path.join(TOP, 'guest_image', 'ufo-guest')
    with open(os.path.join(src, 'ufo_guest.c')) as f:
        module = re.search(r'^MODULE_VERSION\("([^"]+)"\);', f.read(),
                           re.M).group(1)
    with open(os.path.join(src, 'dkms.conf')) as f:
        dkms = re.search(r'^PACKAGE_VERSION="([^"]+)"', f.read(),
                         re.M).group(1)
    assert module == dkms
