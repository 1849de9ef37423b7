"""sd_notify over a real AF_UNIX datagram socket, as systemd listens."""

import os
import socket
import uuid

import pytest

from ufo_agent.service import sdnotify


@pytest.fixture
def listener(tmp_path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / 'notify')
    sock.bind(path)
    sock.settimeout(5)
    yield path, sock
    sock.close()


def test_ready_watchdog_and_stopping_reach_the_socket(listener):
    path, sock = listener
    notifier = sdnotify.Notifier({'NOTIFY_SOCKET': path})
    assert notifier.enabled
    assert notifier.ready('managing 2 guests')
    assert sock.recv(4096) == b'READY=1\nSTATUS=managing 2 guests'
    assert notifier.watchdog()
    assert sock.recv(4096) == b'WATCHDOG=1'
    assert notifier.stopping()
    assert sock.recv(4096) == b'STOPPING=1'
    notifier.close()


def test_abstract_namespace_address():
    name = 'ufo-test-%s' % uuid.uuid4().hex
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind('\0' + name)
    sock.settimeout(5)
    try:
        notifier = sdnotify.Notifier({'NOTIFY_SOCKET': '@' + name})
        assert notifier.ready()
        assert sock.recv(4096) == b'READY=1'
        notifier.close()
    finally:
        sock.close()


def test_without_systemd_nothing_is_sent():
    notifier = sdnotify.Notifier({})
    assert not notifier.enabled
    assert not notifier.ready() and not notifier.watchdog()


def test_a_vanished_socket_is_logged_not_raised(tmp_path, caplog):
    notifier = sdnotify.Notifier({'NOTIFY_SOCKET': str(tmp_path / 'gone')})
    assert not notifier.watchdog()
    assert 'Could not notify systemd (WATCHDOG=1)' in caplog.text


def test_watchdog_interval_is_read_for_this_process_only():
    env = {'NOTIFY_SOCKET': '/run/x', 'WATCHDOG_USEC': '30000000'}
    assert sdnotify.Notifier(env).watchdog_usec == 30000000
    env['WATCHDOG_PID'] = str(os.getpid())
    assert sdnotify.Notifier(env).watchdog_usec == 30000000
    env['WATCHDOG_PID'] = str(os.getpid() + 1)
    assert sdnotify.Notifier(env).watchdog_usec is None
