"""[agent] libvirt_pin_wait against the libvirt call deadline."""

import pytest

from ufo_agent.cmd import agent


@pytest.fixture
def conf():
    conf = agent.CONF
    yield conf
    conf.clear_override('libvirt_pin_wait', group='agent')
    conf.clear_override('libvirt_call_timeout', group='agent')


def test_the_default_waits_half_a_second(conf):
    assert agent._pin_wait(conf) == 0.5


def test_zero_waits_the_whole_deadline(conf):
    conf.set_override('libvirt_pin_wait', 0, group='agent')
    conf.set_override('libvirt_call_timeout', 7.0, group='agent')
    assert agent._pin_wait(conf) == 7.0


def test_a_wait_past_the_deadline_is_refused_by_name(conf):
    conf.set_override('libvirt_pin_wait', 6.0, group='agent')
    with pytest.raises(agent.StartupError,
                       match=r'\[agent\] libvirt_pin_wait \(6 s\) is longer '
                             r'than \[agent\] libvirt_call_timeout \(5 s\)'):
        agent._pin_wait(conf)


def test_no_deadline_takes_any_wait(conf):
    conf.set_override('libvirt_call_timeout', 0, group='agent')
    conf.set_override('libvirt_pin_wait', 2.0, group='agent')
    assert agent._pin_wait(conf) == 2.0
