"""oslo.config options of ufo-agent, one module per option group."""

from oslo_config import cfg

from ufo_agent.conf import agent
from ufo_agent.conf import channel
from ufo_agent.conf import controller
from ufo_agent.conf import host_cpus
from ufo_agent.conf import publishers
from ufo_agent.conf import signal

CONF = cfg.CONF

agent.register_opts(CONF)
channel.register_opts(CONF)
controller.register_opts(CONF)
host_cpus.register_opts(CONF)
publishers.register_opts(CONF)
signal.register_opts(CONF)
