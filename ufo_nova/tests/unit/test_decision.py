"""The pure decisions behind UFOFilter and UFOIdlePoolWeigher."""

import pytest

from ufo_agent import hostsignal
from ufo_nova import cache
from ufo_nova import decision

OPEN, CLOSED = 'fail-open', 'fail-closed'


def lookup(state, idle=0, reclaimable=0, unmet=0):
    if state == cache.UNKNOWN:
        return cache.Lookup(cache.UNKNOWN)
    return cache.Lookup(state, hostsignal.HostSignal(
        state=state, idle_cores=idle, reclaimable_cores=reclaimable,
        managed_cores=32, unmet_cores=unmet, sequence=1, timestamp=0.0,
        source='s'), 1.0)


@pytest.mark.parametrize('vcpus, fraction, expected', [
    (4, 0.5, 2), (3, 0.5, 2), (1, 0.5, 1), (1, 0.1, 1), (8, 1.0, 8),
    (0, 0.5, 0), (4, 0.0, 0), (10, 0.3, 3),
])
def test_expected_cores(vcpus, fraction, expected):
    assert decision.expected_cores(vcpus, fraction) == expected


def test_overloaded_always_rejected():
    v = decision.judge(lookup(hostsignal.OVERLOADED, idle=10, unmet=3),
                       1, OPEN)
    assert not v.passes
    assert 'overloaded (unmet demand 3 cores)' in v.reason
    assert not decision.judge(lookup(hostsignal.OVERLOADED, unmet=1), 1,
                              OPEN, already_on_host=True).passes


def test_underloaded_passes():
    assert decision.judge(lookup(hostsignal.UNDERLOADED, idle=3), 64,
                          CLOSED).passes


def test_saturated_fits_or_not():
    sat = lookup(hostsignal.SATURATED, idle=2)
    assert decision.judge(sat, 2, OPEN).passes
    rejected = decision.judge(sat, 3, OPEN)
    assert not rejected.passes
    assert 'expected demand 3 cores' in rejected.reason
    assert 'exceeds 2 idle cores' in rejected.reason
    assert not decision.judge(lookup(hostsignal.SATURATED, idle=0), 1,
                              OPEN).passes
    # Already there: only overload matters.
    assert decision.judge(lookup(hostsignal.SATURATED, idle=0), 8,
                          OPEN, already_on_host=True).passes


def test_unknown_follows_policy():
    missing = lookup(cache.UNKNOWN)
    stale = cache.Lookup(cache.UNKNOWN,
                         lookup(hostsignal.OVERLOADED).signal, 300.0)
    assert decision.judge(missing, 1, OPEN).passes
    assert decision.judge(stale, 1, OPEN).passes
    v = decision.judge(missing, 1, CLOSED)
    assert not v.passes and 'no signal' in v.reason
    v = decision.judge(stale, 1, CLOSED)
    assert not v.passes and 'stale (300 s old)' in v.reason


def test_weight_is_reclaimable_cores_or_zero():
    assert decision.reclaimable_weight(
        lookup(hostsignal.SATURATED, reclaimable=7)) == 7
    assert decision.reclaimable_weight(lookup(cache.UNKNOWN)) == 0


def test_promised_cores_reduce_idle_cores():
    sat = lookup(hostsignal.SATURATED, idle=4)
    assert decision.judge(sat, 2, OPEN, promised=2).passes
    v = decision.judge(sat, 2, OPEN, promised=3)
    assert not v.passes
    assert '1 idle cores (4 reported, 3 promised' in v.reason
    # Only saturated hosts are judged on idle cores.
    assert decision.judge(lookup(hostsignal.UNDERLOADED, idle=4), 2, OPEN,
                          promised=9).passes


@pytest.mark.parametrize('now, then, fraction, expected', [
    (8, 4, 0.5, 2), (4, 4, 0.5, 0), (2, 4, 0.5, 0), (5, 4, 0.5, 1),
])
def test_promised_cores(now, then, fraction, expected):
    assert decision.promised_cores(now, then, fraction) == expected
