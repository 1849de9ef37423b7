"""The files an operator installs: the systemd unit and the entry points."""

import configparser
import os

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


def test_console_scripts_are_declared():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(TOP, 'setup.cfg'))
    scripts = cfg['entry_points']['console_scripts']
    for name in ('ufo-agent', 'ufo-status', 'ufo-bench'):
        assert '%s = ' % name in scripts
