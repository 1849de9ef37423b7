"""SignalEndpoint: decoding, dropping bad payloads, per-process state."""

import logging
import os
import threading

from ufo_agent import hostsignal
from ufo_agent.hostsignal import payload as wire
from ufo_nova import cache as signal_cache
from ufo_nova import listener


def good(seq=1, host='h1'):
    return wire.HostSignalPayload(host, host, hostsignal.HostSignal(
        state=hostsignal.SATURATED, idle_cores=1, reclaimable_cores=2,
        managed_cores=8, unmet_cores=0, sequence=seq, timestamp=1.0,
        source='s')).to_dict()


def test_good_payload_is_stored():
    cache = signal_cache.SignalCache(60)
    endpoint = listener.SignalEndpoint(cache)
    assert endpoint.info({}, 'ufo-agent.h1', wire.EVENT_TYPE, good(), {}) \
        is None  # acknowledged
    assert cache.lookup('h1').state == hostsignal.SATURATED


def test_bad_payloads_are_logged_and_dropped(caplog):
    cache = signal_cache.SignalCache(60)
    endpoint = listener.SignalEndpoint(cache)
    future = good()
    future['ufo_object.version'] = '3.1'
    caplog.set_level(logging.WARNING)
    for raw in (future, {'x': 1}, None, 'junk'):
        assert endpoint.receive('ufo-agent.bad', raw) is False
    assert cache.hosts() == []
    assert 'unsupported HostSignalPayload version 3.1' in caplog.text
    assert 'ufo-agent.bad' in caplog.text


def test_unexpected_errors_never_escape(monkeypatch, caplog):
    cache = signal_cache.SignalCache(60)

    def explode(payload):
        raise KeyError('bug')

    monkeypatch.setattr(cache, 'update', explode)
    endpoint = listener.SignalEndpoint(cache)
    endpoint.info({}, 'p', wire.EVENT_TYPE, good(), {})
    assert 'undecodable host signal' in caplog.text


def test_filter_rule_matches_only_signal_events():
    rule = listener.SignalEndpoint.filter_rule
    assert rule.match({}, 'ufo-agent.h1', wire.EVENT_TYPE, {}, {})
    assert not rule.match({}, 'nova', 'compute.instance.create', {}, {})
    assert not rule.match({}, 'p', 'ufo.host.signalX', {}, {})


def test_pool_name_is_per_process():
    from oslo_config import cfg

    from ufo_nova import conf as ufo_conf
    conf = cfg.ConfigOpts()
    ufo_conf.register_opts(conf)
    conf([])
    assert listener.pool_name(conf).startswith('ufo-nova-scheduler.')
    assert listener.pool_name(conf).endswith('.%d' % os.getpid())


def test_process_cache_is_rebuilt_after_fork(monkeypatch):
    listener.reset()
    first = listener.get_cache()
    assert listener.get_cache() is first
    monkeypatch.setattr(os, 'getpid', lambda: -1)  # as in a forked child
    assert listener.get_cache() is not first
    listener.reset()


def test_listener_disabled(monkeypatch):
    from oslo_config import cfg

    from ufo_nova import conf as ufo_conf
    conf = cfg.ConfigOpts()
    ufo_conf.register_opts(conf)
    conf([])
    conf.set_override('start_listener', False, group='ufo')
    listener.reset()
    assert listener.ensure_listening(conf) is None
    listener.reset()


def test_a_cache_given_is_used_and_no_listener_starts():
    """An embedding process (the cluster simulator) feeds its own cache."""
    now = [0.0]
    cache = signal_cache.SignalCache(60, clock=lambda: now[0])
    try:
        listener.use_cache(cache)
        assert listener.get_cache() is cache
        transport = object()    # would fail if a listener were built
        assert listener.ensure_listening(transport=transport) is None
        listener.SignalEndpoint(listener.get_cache()).receive(
            'ufo-agent.h1', good())
        assert cache.lookup('h1').state == hostsignal.SATURATED
        now[0] = 61.0
        assert cache.lookup('h1').state == 'unknown'
    finally:
        listener.reset()
    assert listener.get_cache() is not cache


class FakeServer:
    """oslo.messaging notification listener whose start() can be held."""

    def __init__(self):
        self.release = threading.Event()
        self.calls = []

    def start(self):
        self.calls.append('start')
        assert self.release.wait(10)

    def stop(self):
        self.calls.append('stop')

    def wait(self):
        self.calls.append('wait')


class FakeTransport:
    def __init__(self):
        self.cleanups = 0

    def cleanup(self):
        self.cleanups += 1


def _signal_listener(monkeypatch):
    from oslo_config import cfg

    from ufo_nova import conf as ufo_conf
    conf = cfg.ConfigOpts()
    ufo_conf.register_opts(conf)
    conf([])
    server, transport = FakeServer(), FakeTransport()
    monkeypatch.setattr(listener.oslo_messaging, 'get_notification_listener',
                        lambda *args, **kwargs: server)
    monkeypatch.setattr(listener.oslo_messaging,
                        'get_notification_transport', lambda conf: transport)
    return listener.SignalListener(conf, cache=None), server, transport


def test_stop_during_start_never_waits_and_leaves_nothing(monkeypatch):
    signal_listener, server, transport = _signal_listener(monkeypatch)
    thread = signal_listener.start()
    # The broker is being reached: stop returns at once.
    signal_listener.stop()
    assert server.calls == ['start']
    assert transport.cleanups == 0
    # Once the start is done, the starting thread stops the poller.
    server.release.set()
    thread.join(10)
    assert server.calls == ['start', 'stop', 'wait']
    assert transport.cleanups == 1
    assert not signal_listener.started.is_set()
    # Stopped for good.
    assert signal_listener.start() is None
    signal_listener.stop()
    assert server.calls == ['start', 'stop', 'wait']


def test_stop_after_start_stops_the_poller_once(monkeypatch):
    signal_listener, server, transport = _signal_listener(monkeypatch)
    server.release.set()
    signal_listener.start().join(10)
    assert signal_listener.started.is_set()
    signal_listener.stop()
    signal_listener.stop()
    assert server.calls == ['start', 'stop', 'wait']
    assert transport.cleanups == 1


def test_stop_before_start_starts_nothing(monkeypatch):
    signal_listener, server, transport = _signal_listener(monkeypatch)
    signal_listener.stop()
    assert signal_listener.start() is None
    assert server.calls == []
    assert transport.cleanups == 1
