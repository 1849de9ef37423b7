"""SIGHUP's reload: the mutable options change, the guests stay."""

import logging

from oslo_config import cfg
from oslo_log import log as oslo_logging
import pytest

from ufo_agent.cmd import agent as cmd
from ufo_agent.conf import agent as agent_opts
from ufo_agent.conf import controller as controller_opts
from ufo_agent.controller import config as controller_config
from ufo_agent.service import loop
from ufo_agent.service import settings as settings_mod
from ufo_agent.tests.unit.service import fakes


@pytest.fixture
def setup(tmp_path):
    """A configuration file, its ConfigOpts and an agent built from it."""
    path = tmp_path / 'ufo-agent.conf'
    conf = cfg.ConfigOpts()
    agent_opts.register_opts(conf)
    controller_opts.register_opts(conf)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    oslo_logging.register_options(conf)

    def write(**groups):
        path.write_text(''.join(
            '[%s]\n%s' % (group, ''.join(
                '%s = %s\n' % kv for kv in values.items()))
            for group, values in groups.items()))

    write(agent={'ack_wait': '0.3'}, controller={'pcu_high': '0.8'})
    conf(['--config-file', str(path)])
    driver = fakes.FakeDriver()
    for name in ('a', 'b'):
        driver.add(fakes.FakeGuest(name, 4))
    agent = loop.Agent(driver, frozenset(c for g in driver.siblings
                                         for c in g),
                       controller_config.ControllerConfig.from_conf(conf),
                       settings_mod.AgentSettings.from_conf(conf))
    agent.start()
    agent.tick()
    try:
        yield conf, write, agent, driver
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        conf.reset()


def test_mutable_options_take_effect_and_the_guests_stay(setup, caplog):
    conf, write, agent, driver = setup
    pins = {u: g.vcpu_pins for u, g in driver.all.items()}
    write(DEFAULT={'debug': 'true'},
          agent={'ack_wait': '0.1', 'ack_timeout': '1.5',
                 'drift_check_interval': '3', 'libvirt_uri': 'test:///x'},
          controller={'pcu_high': '0.9', 'idle_after': '30'})
    with caplog.at_level(logging.INFO):
        changes = cmd.reload(conf, agent)
        # oslo.log's own hook: the log level follows [DEFAULT] debug.
        assert logging.getLogger().level == logging.DEBUG
    assert changes == {
        'agent.ack_wait': (0.3, 0.1), 'agent.ack_timeout': (2.0, 1.5),
        'agent.drift_check_interval': (10.0, 3.0),
        'controller.pcu_high': (0.8, 0.9),
        'controller.idle_after': (10.0, 30.0)}
    assert agent.enforcer.ack_wait == 0.1
    assert agent.enforcer.ack_timeout == 1.5
    assert agent.settings.drift_check_interval == 3.0
    assert agent.controller.config.pcu_high == 0.9
    assert agent.controller.vms['a'].idle.config.idle_after == 30.0
    assert 'agent.ack_wait 0.3 -> 0.1' in caplog.text
    # libvirt_uri cannot change at run time: oslo.config says so.
    assert conf.agent.libvirt_uri == 'qemu:///system'
    assert 'Ignoring change to immutable option agent.libvirt_uri' in \
        caplog.text
    # Nothing was released or re-pinned for the reload.
    assert set(agent.guests) == {'a', 'b'}
    assert not [c for c in driver.calls if c[0] == 'release']
    assert {u: g.vcpu_pins for u, g in driver.all.items()} == pins
    agent.tick()
    assert agent.snapshot['config']['agent']['ack_wait'] == 0.1
    assert agent.snapshot['config']['controller']['pcu_high'] == 0.9


@pytest.mark.parametrize('groups,message', [
    ({'controller': {'pcu_high': '0.3'}}, 'pcu_low must be below pcu_high'),
    ({'agent': {'ack_wait': '7'}}, 'ack_wait'),
    ({'agent': {'ack_wait': 'soon'}}, 'ack_wait'),
])
def test_a_bad_value_keeps_the_running_configuration(setup, caplog, groups,
                                                     message):
    conf, write, agent, driver = setup
    settings, config = agent.settings, agent.controller.config
    write(**groups)
    with caplog.at_level(logging.ERROR):
        assert cmd.reload(conf, agent) == {}
    assert 'Not applying the reloaded configuration' in caplog.text
    assert message in caplog.text
    assert agent.settings is settings and agent.controller.config is config
    assert set(agent.guests) == {'a', 'b'}


def test_dry_run_from_the_command_line_survives_a_reload(setup):
    conf, write, agent, driver = setup
    agent.settings = settings_mod.AgentSettings(dry_run=True)
    write(agent={'ack_wait': '0.2'})
    cmd.reload(conf, agent)
    assert agent.settings.dry_run and agent.settings.ack_wait == 0.2
