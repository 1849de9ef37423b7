"""Loading publishers through stevedore, and isolating their failures."""

import logging
import socket
import threading
import time

import pytest

from ufo_agent import publishers
from ufo_agent.publishers import notification


def nova_conf(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


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


def test_host_is_novas_own_host_from_nova_conf(conf, tmp_path):
    """The name nova-scheduler knows the host by: nova.conf [DEFAULT] host.

    Read as nova-compute reads it: --config-file in order, then the
    --config-dir files in name order, a later value winning.
    """
    first = nova_conf(tmp_path, 'nova.conf', '[DEFAULT]\nhost = compute-1\n')
    second = nova_conf(tmp_path, 'nova-compute.conf',
                       '[DEFAULT]\nhost = compute-12\n')
    conf.set_override('nova_config', [first, second], group='host_cpus')
    assert publishers.host_and_node(conf, 'machine.example.org') == (
        'compute-12', 'machine.example.org')
    conf_d = tmp_path / 'nova.conf.d'
    conf_d.mkdir()
    (conf_d / '10-host.conf').write_text('[DEFAULT]\nhost = compute-13\n')
    conf.set_override('nova_config_dir', str(conf_d), group='host_cpus')
    assert publishers.host_and_node(conf)[0] == 'compute-13'
    conf.set_override('enabled', ['notification'], group='publishers')
    loaded = publishers.load(conf)
    assert loaded.publishers[0].host == 'compute-13'
    loaded.close()


def test_host_falls_back_to_the_hostname_as_novas_default(conf, tmp_path):
    assert publishers.host_and_node(conf)[0] == socket.gethostname()
    plain = nova_conf(tmp_path, 'nova.conf', '[compute]\ncpu_shared_set = 1\n')
    conf.set_override('nova_config', [plain], group='host_cpus')
    names = publishers.signal_names(conf)
    assert names.host == socket.gethostname()
    assert 'not set in %s' % plain in names.host_origin


def test_own_host_option_wins_and_a_mismatch_is_warned(conf, tmp_path,
                                                       caplog):
    path = nova_conf(tmp_path, 'nova.conf', '[DEFAULT]\nhost = compute-12\n')
    conf.set_override('nova_config', [path], group='host_cpus')
    conf.set_override('host', 'compute-12', group='publishers')
    with caplog.at_level(logging.WARNING):
        assert publishers.host_and_node(conf)[0] == 'compute-12'
    assert not caplog.records
    conf.set_override('host', 'vm', group='publishers')
    with caplog.at_level(logging.WARNING):
        assert publishers.host_and_node(conf)[0] == 'vm'
    [warning] = caplog.records
    assert '[publishers] host is vm but nova-compute\'s host is ' \
        'compute-12' in warning.getMessage()


def test_an_invalid_nova_host_names_file_and_option(conf, tmp_path):
    path = nova_conf(tmp_path, 'nova.conf', '[DEFAULT]\nhost = a b\n')
    conf.set_override('nova_config', [path], group='host_cpus')
    conf.set_override('enabled', ['notification'], group='publishers')
    with pytest.raises(ValueError, match=r'nova.conf \[DEFAULT\] host '
                       r'\(read from .*nova.conf\)'):
        publishers.load(conf)


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
        self.started = False
        self.closed = False

    def start(self):
        self.started = True

    def publish(self, signal):
        self.seen.append(signal)

    def close(self):
        self.closed = True


def test_failing_publisher_does_not_stop_others():
    record = Record()

    class BoomAtStart(Boom):
        def start(self):
            raise RuntimeError('boom')

    group = publishers.PublisherSet([BoomAtStart(None, 'h', 'n'), record])
    group.start()
    assert record.started
    fake_signal = type('S', (), {'sequence': 1})()
    group.publish(fake_signal)
    group.close()
    assert record.seen == [fake_signal]
    assert record.closed


class _Slow:
    def __init__(self):
        self.sent = []
        self.closed = False

    def start(self):
        pass

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
    # One send waited for would take 0.3 s.
    assert time.monotonic() - start < 0.25
    background.close()
    # Signals that came while a send was under way were coalesced into
    # the newest, which close() still sends before closing the publishers.
    assert slow.sent[-1] == 5 and slow.sent == sorted(slow.sent)
    assert len(slow.sent) <= 2 and slow.closed


def test_background_publisher_starts_publishers_before_the_first_signal():
    order = []
    release = threading.Event()

    class Starting:
        def start(self):
            # A slow Placement at start holds neither the caller nor
            # the order: start, then the signals.
            release.wait(5)
            order.append('start')

        def publish(self, signal):
            order.append(signal)

        def close(self):
            order.append('close')

    background = publishers.BackgroundPublisher(Starting())
    start = time.monotonic()
    background.publish(1)
    # Waiting for the start would take until release, 5 s at most.
    assert time.monotonic() - start < 2.0
    release.set()
    background.close()
    assert order == ['start', 1, 'close']
