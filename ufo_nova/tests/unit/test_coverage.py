"""The scheduler's now-and-then count of hosts with and without signals."""

import logging

from ufo_agent import hostsignal
from ufo_agent.hostsignal import payload as wire
from ufo_nova import cache as signal_cache
from ufo_nova import coverage


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def payload(host, seq=1):
    return wire.HostSignalPayload(host, host, hostsignal.HostSignal(
        state=hostsignal.UNDERLOADED, idle_cores=2, reclaimable_cores=2,
        managed_cores=8, unmet_cores=0, sequence=seq, timestamp=1.0,
        source='a'))


def snapshot_of(clock, stale=(), fresh=()):
    cache = signal_cache.SignalCache(60, clock=clock)
    for host in stale:
        cache.update(payload(host))
    clock.now += 61
    for host in fresh:
        cache.update(payload(host))
    return cache.snapshot()


def test_hosts_are_counted_fresh_stale_and_missing():
    snap = snapshot_of(Clock(), stale=['c2'], fresh=['c1', 'vm'])
    found = coverage.count(snap, ['c3', 'c1', 'c2', 'c1'])
    assert found == coverage.Coverage(fresh=['c1'], stale=['c2'],
                                      missing=['c3'], unmatched=['vm'])
    line = coverage.describe(found)
    assert line.startswith('UFO host signals of the 3 hosts considered: '
                           '1 fresh, 1 stale, 1 without any')
    assert '; stale: c2; without any: c3;' in line
    # A host without a signal beside signals under an unknown name: the
    # agent's host name is the likely cause, and the line says so.
    assert 'signals also come from hosts not considered: vm' in line
    assert "Nova's [DEFAULT] host" in line


def test_all_fresh_names_nobody():
    snap = snapshot_of(Clock(), fresh=['c1', 'c2'])
    line = coverage.describe(coverage.count(snap, ['c1', 'c2']))
    assert line == ('UFO host signals of the 2 hosts considered: 2 fresh, '
                    '0 stale, 0 without any')


def test_long_lists_are_cut():
    snap = snapshot_of(Clock())
    hosts = ['c%02d' % i for i in range(25)]
    line = coverage.describe(coverage.count(snap, hosts))
    assert 'c09 and 15 more' in line and 'c10' not in line


def test_reporter_logs_at_most_once_per_interval(caplog):
    clock = Clock()
    reporter = coverage.Reporter(clock=clock)
    assert reporter.due(600)  # at once after a start
    assert not reporter.due(600)
    clock.now += 599.9
    assert not reporter.due(600)
    clock.now += 0.1
    assert reporter.due(600)
    assert not reporter.due(0)  # 0: off
    snap = snapshot_of(clock, fresh=['c1'])
    with caplog.at_level(logging.INFO, logger='ufo_nova.coverage'):
        reporter.report(snap, iter(['c1', 'c2']))
    [record] = caplog.records
    assert record.levelno == logging.INFO
    assert '1 fresh, 0 stale, 1 without any' in record.getMessage()
