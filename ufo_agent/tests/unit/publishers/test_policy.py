from ufo_agent import hostsignal
from ufo_agent.publishers import policy


def sig(state=hostsignal.SATURATED, idle=1, seq=1):
    return hostsignal.HostSignal(
        state=state, idle_cores=idle, reclaimable_cores=idle,
        managed_cores=8, unmet_cores=0, sequence=seq, timestamp=0.0,
        source='s')


def test_first_signal_is_sent():
    assert policy.SendPolicy(30, 5).should_send(sig(), 0)


def test_unchanged_signal_waits_for_keepalive():
    p = policy.SendPolicy(30, 5)
    p.sent(sig(seq=1), 100)
    assert not p.should_send(sig(seq=2), 129.9)
    assert p.should_send(sig(seq=3), 130)


def test_state_change_is_sent_at_once():
    p = policy.SendPolicy(30, 5)
    p.sent(sig(), 100)
    assert p.should_send(sig(state=hostsignal.OVERLOADED), 100.1)


def test_count_change_is_rate_limited():
    p = policy.SendPolicy(30, 5)
    p.sent(sig(idle=1), 100)
    assert not p.should_send(sig(idle=2), 104)
    assert p.should_send(sig(idle=2), 105)


def test_clock_going_back_sends():
    p = policy.SendPolicy(30, 5)
    p.sent(sig(), 100)
    assert p.should_send(sig(), 50)


def test_invalid_intervals():
    import pytest
    with pytest.raises(ValueError):
        policy.SendPolicy(0)
    with pytest.raises(ValueError):
        policy.SendPolicy(10, -1)
