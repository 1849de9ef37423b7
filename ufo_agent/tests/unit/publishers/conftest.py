import pytest

from oslo_config import cfg

from ufo_agent.conf import publishers as publishers_conf


@pytest.fixture
def conf():
    c = cfg.ConfigOpts()
    publishers_conf.register_opts(c)
    c([], default_config_files=[], default_config_dirs=[])
    return c
