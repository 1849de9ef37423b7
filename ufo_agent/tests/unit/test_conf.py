"""oslo.config options of ufo-agent."""

import dataclasses

from oslo_config import cfg
from oslo_config import fixture as config_fixture
import pytest

from ufo_agent.conf import agent as agent_opts
from ufo_agent.conf import controller as controller_opts
from ufo_agent.conf import host_cpus as host_opts
from ufo_agent.conf import opts
from ufo_agent.controller import ControllerConfig
from ufo_agent.service import settings


@pytest.fixture
def conf():
    conf = cfg.ConfigOpts()
    controller_opts.register_opts(conf)
    host_opts.register_opts(conf)
    fixture = config_fixture.Config(conf)
    fixture.setUp()
    yield fixture
    fixture.cleanUp()


def test_defaults_are_the_papers(conf):
    built = ControllerConfig.from_conf(conf.conf)
    assert built == ControllerConfig()
    assert (built.sf_threshold, built.pcu_low, built.pcu_high) == (
        0.30, 0.40, 0.80)
    assert (built.emulator_util_low, built.emulator_util_high) == (0.6, 0.8)
    assert (built.samples_per_model, built.min_samples_to_fit,
            built.refit_error) == (8, 3, 0.05)
    assert (built.idle_util, built.tick_interval, built.settle_time) == (
        1.0, 1.0, 3.0)


def test_every_option_has_help_and_is_listed():
    listed = {(group.name, opt.name) for group, group_opts in
              opts.list_opts() for opt in group_opts}
    for group, group_opts in opts.list_opts():
        for opt in group_opts:
            assert opt.help, opt.name
    # Ours say what they do (keystoneauth's own auth options are terse).
    for group in (controller_opts, host_opts):
        for group_opts in group.list_opts().values():
            for opt in group_opts:
                assert len(opt.help) > 40, opt.name
    assert ('controller', 'sf_threshold') in listed
    assert ('host_cpus', 'managed_cpus') in listed


def test_nova_config_defaults_to_the_files_nova_compute_reads(conf, tmp_path):
    assert conf.conf.host_cpus.nova_config == [
        '/etc/nova/nova.conf', '/etc/nova/nova-compute.conf']
    assert conf.conf.host_cpus.nova_config_dir == '/etc/nova/nova.conf.d'
    assert conf.conf.host_cpus.managed_cpus is None
    path = tmp_path / 'ufo-agent.conf'
    path.write_text('[host_cpus]\nnova_config = /etc/nova/nova-cpu.conf, '
                    '/etc/nova/extra.conf\nnova_config_dir =\n')
    conf.conf(['--config-file', str(path)], default_config_files=[])
    assert conf.conf.host_cpus.nova_config == [
        '/etc/nova/nova-cpu.conf', '/etc/nova/extra.conf']
    assert conf.conf.host_cpus.nova_config_dir == ''


def test_out_of_range_value_in_a_file_names_the_option(tmp_path):
    path = tmp_path / 'ufo-agent.conf'
    path.write_text('[controller]\nsf_threshold = 1.5\n')
    conf = cfg.ConfigOpts()
    controller_opts.register_opts(conf)
    conf(['--config-file', str(path)], project='ufo-agent')
    with pytest.raises(cfg.ConfigFileValueError, match='sf_threshold'):
        ControllerConfig.from_conf(conf)


def test_inconsistent_values_are_refused_naming_them(conf):
    conf.config(pcu_low=0.9, group='controller')
    with pytest.raises(ValueError, match=r'\[controller\] pcu_low'):
        ControllerConfig.from_conf(conf.conf)


def test_controller_defaults_are_written_once():
    """Every [controller] option takes its default from ControllerConfig."""
    fields = {f.name: f.default for f in dataclasses.fields(ControllerConfig)}
    options = {opt.name: opt.default for opt in controller_opts.OPTS}
    assert options == fields


def test_agent_defaults_are_written_once():
    options = {opt.name: opt.default for opt in agent_opts.OPTS}
    for field in dataclasses.fields(settings.AgentSettings):
        assert options[field.name] == field.default, field.name


def _guest_watchdog_default():
    """ufo_guest's default watchdog_ms, in seconds, from its source."""
    import os
    import re
    top = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))))
    with open(os.path.join(top, 'guest_image', 'ufo-guest',
                           'ufo_guest.c')) as handle:
        [ms] = re.findall(r'static unsigned int watchdog_ms = (\d+);',
                          handle.read())
    return int(ms) / 1000.0


def test_the_guest_watchdog_the_agent_assumes_is_the_modules():
    assert agent_opts.GUEST_WATCHDOG == _guest_watchdog_default()


@pytest.mark.parametrize('interval, ok', [
    (0.5, True), (2.5, True), (2.6, False), (5.0, False), (10.0, False)])
def test_the_heartbeat_stays_within_half_the_guest_watchdog(
        tmp_path, interval, ok):
    path = tmp_path / 'ufo-agent.conf'
    path.write_text('[agent]\nheartbeat_interval = %s\n' % interval)
    conf = cfg.ConfigOpts()
    agent_opts.register_opts(conf)
    conf(['--config-file', str(path)], project='ufo-agent')
    if ok:
        assert settings.AgentSettings.from_conf(conf).heartbeat_interval \
            == interval
        assert 2 * interval <= _guest_watchdog_default()
    else:
        with pytest.raises(cfg.ConfigFileValueError,
                           match='heartbeat_interval'):
            settings.AgentSettings.from_conf(conf)
