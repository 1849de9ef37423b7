from hypothesis import given
from hypothesis import strategies as st

from ufo_sim.managers import search


@given(st.integers(1, 8), st.integers(1, 20), st.integers(0, 25))
def test_min_feasible_finds_threshold(lo, span, threshold):
    hi = lo + span - 1
    calls = []

    def feasible(n):
        calls.append(n)
        return n >= threshold

    found = search.min_feasible(lo, hi, feasible)
    if threshold > hi:
        assert found is None
        assert calls == [hi]
    else:
        assert found == max(lo, threshold)
        # Bisection, not a scan.
        assert len(calls) <= span.bit_length() + 1


def test_min_feasible_empty_range():
    assert search.min_feasible(3, 2, lambda n: True) is None


@given(st.lists(st.integers(0, 6), min_size=1, max_size=4))
def test_min_feasible_each_per_item(thresholds):
    n = len(thresholds)
    trials = []

    def feasible_all(counts):
        trials.append(counts)
        return [c >= t for c, t in zip(counts, thresholds)]

    found = search.min_feasible_each([1] * n, [4] * n, feasible_all)
    for got, t in zip(found, thresholds):
        assert got == (None if t > 4 else max(1, t))
    # Items are bisected together: a few shared trials, not one per count.
    assert len(trials) <= 4
