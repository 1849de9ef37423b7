"""SignalCache: ordering, staleness, snapshots, threads."""

import threading

import pytest

from ufo_agent import hostsignal
from ufo_agent.hostsignal import payload as wire
from ufo_nova import cache as signal_cache


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def payload(host='h1', seq=1, state=hostsignal.UNDERLOADED, idle=4,
            source='a'):
    return wire.HostSignalPayload(host, host, hostsignal.HostSignal(
        state=state, idle_cores=idle, reclaimable_cores=idle,
        managed_cores=32, unmet_cores=0, sequence=seq, timestamp=1.0,
        source=source))


def test_missing_host_is_unknown():
    lookup = signal_cache.SignalCache(60).lookup('nowhere')
    assert lookup.state == signal_cache.UNKNOWN
    assert lookup.signal is None


def test_fresh_then_stale():
    clock = Clock()
    cache = signal_cache.SignalCache(60, clock=clock)
    assert cache.update(payload())
    assert cache.lookup('h1').state == hostsignal.UNDERLOADED
    clock.now += 60
    assert cache.lookup('h1').state == hostsignal.UNDERLOADED
    assert cache.snapshot().lookup('h1').state == hostsignal.UNDERLOADED
    assert cache.snapshot().reclaimable_cores('h1') == 4
    assert cache.snapshot().reclaimable_cores('other') == 0
    clock.now += 0.1
    stale = cache.lookup('h1')
    assert stale.state == signal_cache.UNKNOWN
    assert stale.signal.idle_cores == 4  # kept for the log message
    assert stale.age == pytest.approx(60.1)
    assert cache.snapshot().lookup('h1') == stale
    assert cache.snapshot().reclaimable_cores('h1') == 0


def test_older_sequence_from_same_source_is_ignored():
    cache = signal_cache.SignalCache(60)
    assert cache.update(payload(seq=5, idle=5))
    assert not cache.update(payload(seq=4, idle=9))
    assert not cache.update(payload(seq=5, idle=9))
    assert cache.lookup('h1').signal.idle_cores == 5
    # A restarted agent (new source) starts again at 1.
    assert cache.update(payload(seq=1, idle=7, source='b'))
    assert cache.lookup('h1').signal.idle_cores == 7


def test_snapshot_is_frozen_in_time_and_content():
    clock = Clock()
    cache = signal_cache.SignalCache(10, clock=clock)
    cache.update(payload('h1'))
    snap = cache.snapshot()
    cache.update(payload('h2'))
    clock.now += 100
    assert snap.lookup('h1').state == hostsignal.UNDERLOADED
    assert snap.lookup('h2').state == signal_cache.UNKNOWN
    assert len(snap) == 1
    assert cache.hosts() == ['h1', 'h2']
    cache.clear()
    assert cache.hosts() == []


def test_invalid_max_age():
    with pytest.raises(ValueError):
        signal_cache.SignalCache(0)


def test_concurrent_writers_and_readers():
    cache = signal_cache.SignalCache(60)
    errors = []
    hosts = ['h%d' % i for i in range(20)]

    def writer(n):
        try:
            for seq in range(1, 301):
                cache.update(payload(hosts[(seq + n) % 20], seq=seq,
                                     source='w%d' % n))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader():
        try:
            for _ in range(300):
                snap = cache.snapshot()
                for host in hosts:
                    snap.lookup(host)
                    cache.lookup(host)
        except Exception as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    threads += [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert cache.hosts() == sorted(hosts)
