"""A guest's claims checked against what the host saw."""

from ufo_agent.channel import crosscheck
from ufo_agent.service import sampler


def test_guest_util_cannot_exceed_what_its_threads_ran():
    assert crosscheck.check_guest_util(180.0, 200.0).ok
    assert crosscheck.check_guest_util(225.0, 200.0).ok      # tolerance
    lie = crosscheck.check_guest_util(800.0, 200.0)
    assert not lie.ok and '800%' in lie.reason


def test_host_only_sample_is_never_negative():
    assert sampler.host_only_sample(-1.0, 300.0) == (0.0, 300.0)
