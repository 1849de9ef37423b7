"""Loading publishers through stevedore, and isolating their failures."""

import time

import pytest

from ufo_agent import publishers
from ufo_agent.publishers import notification


def test_entry_points_are_installed():
    assert {'notification', 'placement'} <= set(publishers.available())


def test_load_named_publishers(conf):
    conf.set_override('enabled', ['notification'], group='publishers')
    conf.set_override('host', 'compute7', group='publishers')
    loaded = publishers.load(conf)
    assert [type(p) for p in loaded.publishers] == [
        notification.NotificationPublisher]
    assert loaded.publishers[0].host == 'compute7'
    assert loaded.publishers[0].nodename == 'compute7'
    loaded.close()


def test_node_name_defaults_to_libvirts_then_host(conf):
    """Nova's libvirt driver names the compute node after libvirt."""
    conf.set_override('host', 'compute7', group='publishers')
    assert publishers.host_and_node(conf, 'compute7.example.org') == (
        'compute7', 'compute7.example.org')
    assert publishers.host_and_node(conf) == ('compute7', 'compute7')
    conf.set_override('nodename', 'node-a', group='publishers')
    assert publishers.host_and_node(conf, 'compute7.example.org') == (
        'compute7', 'node-a')
    conf.set_override('enabled', ['notification'], group='publishers')
    loaded = publishers.load(conf, 'compute7.example.org')
    assert loaded.publishers[0].nodename == 'node-a'
    loaded.close()


def test_unknown_publisher_names_the_option(conf):
    conf.set_override('enabled', ['notification', 'carrier-pigeon'],
                      group='publishers')
    with pytest.raises(ValueError, match=r'\[publishers\] enabled.*'
                                         r'carrier-pigeon'):
        publishers.load(conf)


def test_nothing_enabled(conf):
    conf.set_override('enabled', [], group='publishers')
    assert publishers.load(conf).publishers == []


class Boom(publishers.Publisher):
    def publish(self, signal):
        raise RuntimeError('boom')

    def close(self):
        raise RuntimeError('boom')


class Record(publishers.Publisher):
    def __init__(self):
        super().__init__(None, 'h', 'n')
        self.seen = []
        self.closed = False

    def publish(self, signal):
        self.seen.append(signal)

    def close(self):
        self.closed = True


def test_failing_publisher_does_not_stop_others():
    record = Record()
    group = publishers.PublisherSet([Boom(None, 'h', 'n'), record])
    fake_signal = type('S', (), {'sequence': 1})()
    group.publish(fake_signal)
    group.close()
    assert record.seen == [fake_signal]
    assert record.closed


class _Slow:
    def __init__(self):
        self.sent = []
        self.closed = False

    def publish(self, signal):
        time.sleep(0.3)
        self.sent.append(signal)

    def close(self):
        self.closed = True


def test_background_publisher_never_makes_the_caller_wait():
    slow = _Slow()
    background = publishers.BackgroundPublisher(slow)
    start = time.monotonic()
    for sequence in range(1, 6):
        background.publish(sequence)
    assert time.monotonic() - start < 0.1
    background.close()
    # Signals that came while a send was under way were coalesced into
    # the newest, which close() still sends before closing the publishers.
    assert slow.sent[-1] == 5 and slow.sent == sorted(slow.sent)
    assert len(slow.sent) <= 2 and slow.closed
