"""ufo-agent configurations for tests that run beside Nova.

Importing the package ``ufo_agent.conf`` registers every agent option group
on oslo.config's global CONF, and its ``[host]`` group hides Nova's
``CONF.host`` in a process where Nova runs. These helpers load the agent's
option modules (which only define options) without that package, and
register them on a private ConfigOpts.
"""

import importlib.util
import os

from oslo_config import cfg
import oslo_messaging.opts

import ufo_agent


def option_module(name):
    """Load ufo_agent/conf/<name>.py without running its package."""
    path = os.path.join(os.path.dirname(ufo_agent.__file__), 'conf',
                        name + '.py')
    spec = importlib.util.spec_from_file_location(
        'ufo_nova_tests_agent_conf_' + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def agent_conf(config_file=None, **publishers):
    """A private ufo-agent ConfigOpts with [publishers] and [signal].

    And [host_cpus], whose nova_config and nova_config_dir say where the
    publishers read nova-compute's host name: by default none, so that
    nothing of the machine running the tests is read; ``config_file`` may
    name files.
    """
    conf = cfg.ConfigOpts()
    option_module('publishers').register_opts(conf)
    option_module('signal').register_opts(conf)
    option_module('host_cpus').register_opts(conf)
    conf.set_default('nova_config', [], group='host_cpus')
    conf.set_default('nova_config_dir', '', group='host_cpus')
    args = ['--config-file', config_file] if config_file else []
    conf(args, project='ufo-agent', default_config_files=[],
         default_config_dirs=[])
    _agent_exchange(conf)
    for name, value in publishers.items():
        conf.set_override(name, value, group='publishers')
    return conf


def _agent_exchange(conf):
    """Give conf the exchange an agent process has: oslo.messaging's own.

    Nova sets the shared default of ``control_exchange`` to ``nova`` in its
    process (``nova.rpc``), which would otherwise reach this private
    configuration and put the agent on Nova's exchange, where no real
    agent publishes.
    """
    for group, opts in oslo_messaging.opts.list_opts():
        if group is None:
            conf.register_opts(
                [o for o in opts if o.name == 'control_exchange'])
    conf.set_default('control_exchange', 'openstack')
