import pytest

from oslo_config import cfg

from ufo_agent.conf import host_cpus as host_cpus_conf
from ufo_agent.conf import publishers as publishers_conf


@pytest.fixture
def conf():
    c = cfg.ConfigOpts()
    publishers_conf.register_opts(c)
    # Where the publishers read nova-compute's host name: nothing of the
    # machine running the tests, unless a test points it at a file.
    host_cpus_conf.register_opts(c)
    c([], default_config_files=[], default_config_dirs=[])
    c.set_override('nova_config', [], group='host_cpus')
    c.set_override('nova_config_dir', '', group='host_cpus')
    yield c
    # oslo.config keeps overrides in the option groups, which are shared
    # module objects: clear them for the next test's ConfigOpts.
    for group, opts in (('publishers', publishers_conf.OPTS),
                        ('host_cpus', host_cpus_conf.OPTS),
                        ('placement', publishers_conf.PLACEMENT_OPTS)):
        for opt in opts:
            c.clear_override(opt.dest, group=group)
