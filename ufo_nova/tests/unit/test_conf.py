"""[ufo] options: defaults, validation, generator entry point."""

from oslo_config import cfg
import pytest

from ufo_nova import conf as ufo_conf


def make():
    conf = cfg.ConfigOpts()
    ufo_conf.register_opts(conf)
    conf([])
    return conf


def test_defaults():
    conf = make()
    assert conf.ufo.unknown_host_policy == 'fail-open'
    assert conf.ufo.expected_demand_fraction == 0.5
    assert conf.ufo.notification_topics == ['ufo_notifications']


@pytest.mark.parametrize('name, value', [
    ('unknown_host_policy', 'maybe'),
    ('expected_demand_fraction', -0.1),
    ('signal_max_age', 0),
])
def test_bad_values_name_the_option(name, value):
    conf = make()
    with pytest.raises(ValueError):
        conf.set_override(name, value, group='ufo')


def test_bad_value_in_file_fails_at_start(tmp_path):
    path = tmp_path / 'nova.conf'
    path.write_text('[ufo]\nunknown_host_policy = sometimes\n')
    conf = cfg.ConfigOpts()
    ufo_conf.register_opts(conf)
    conf(['--config-file', str(path)])
    with pytest.raises(cfg.ConfigFileValueError,
                       match='unknown_host_policy'):
        conf.ufo.unknown_host_policy


def test_list_opts():
    [(group, opts)] = ufo_conf.list_opts()
    assert group.name == 'ufo'
    assert all(opt.help for opt in opts)
