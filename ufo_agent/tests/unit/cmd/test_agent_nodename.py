"""The node name the agent publishes when [publishers] nodename is unset."""

import pytest

from ufo_agent.cmd import agent
from ufo_agent.driver import base


class Driver:
    def __init__(self, hostname=None, error=None):
        self._hostname, self._error = hostname, error
        self.asked = 0
        self.closed = False

    def hostname(self):
        self.asked += 1
        if self._error:
            raise self._error
        return self._hostname

    def close(self):
        self.closed = True


@pytest.fixture
def conf():
    conf = agent.CONF
    yield conf
    conf.clear_override('nodename', group='publishers')
    conf.clear_override('enabled', group='publishers')


def test_unset_nodename_is_libvirts_host_name(conf):
    driver = Driver('compute-1.example.org')
    assert agent._hypervisor_hostname(conf, driver) == 'compute-1.example.org'


def test_set_nodename_or_no_publisher_does_not_ask_libvirt(conf):
    driver = Driver('compute-1.example.org')
    conf.set_override('nodename', 'node-a', group='publishers')
    assert agent._hypervisor_hostname(conf, driver) is None
    conf.clear_override('nodename', group='publishers')
    conf.set_override('enabled', [], group='publishers')
    assert agent._hypervisor_hostname(conf, driver) is None
    assert driver.asked == 0


def test_libvirt_failure_names_the_option(conf):
    driver = Driver(error=base.DriverError('host name: connection lost'))
    with pytest.raises(agent.StartupError,
                       match=r'\[publishers\] nodename is unset.*'
                             r'connection lost'):
        agent._hypervisor_hostname(conf, driver)
    assert driver.closed
