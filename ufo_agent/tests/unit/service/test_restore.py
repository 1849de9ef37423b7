"""Rounds of giving guests back, over a driver that fails on purpose."""

from ufo_agent.driver import base
from ufo_agent.service import restore


class _Driver:
    def __init__(self, rounds):
        # Per round: the guests listed (None: the listing fails) and the
        # uuids whose release fails.
        self.rounds = list(rounds)
        self.failing = set()
        self.released = []

    def guests(self):
        listed, self.failing = self.rounds.pop(0)
        if listed is None:
            raise base.DriverError('list domains: connection reset')
        return [base.Guest(u, 'vm-' + u, 2, 'lc', frozenset(), frozenset(),
                           False) for u in listed]

    def release(self, uuid):
        if uuid in self.failing:
            raise base.DriverError('release of %s: busy' % uuid)
        self.released.append(uuid)


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def _run(driver, budget=10.0):
    clock = _Clock()
    return restore.restore_guests(lambda: driver, budget, 1.0, clock,
                                  clock.sleep), clock


def test_a_guest_that_failed_and_is_gone_by_the_next_round_needs_nothing():
    driver = _Driver([(['a', 'b'], {'b'}), (['a'], set())])
    out, _ = _run(driver)
    assert out.ok and out.restored == {'a': 'vm-a'}
    assert driver.released == ['a']         # a is not given back twice


def test_a_failed_listing_after_a_good_one_keeps_the_guests_to_do():
    driver = _Driver([(['a', 'b'], {'a', 'b'}), (None, set()),
                      (['a', 'b'], set())])
    out, clock = _run(driver)
    # Given back in the round whose listing failed.
    assert out.ok and sorted(out.restored) == ['a', 'b']
    assert clock.now == 1.0 and len(driver.rounds) == 1


def test_no_round_starts_once_the_budget_is_spent():
    driver = _Driver([(['a'], {'a'})] * 20)
    out, clock = _run(driver, budget=3.0)
    assert not out.ok and out.failed == {'a': 'release of a: busy'}
    assert clock.now == 3.0 and len(driver.rounds) == 16
    assert out.summary(3.0) == ('could not give 1 guest(s) back within 3 s '
                                '(0 given back): a (vm-a): release of a: '
                                'busy')


def test_an_unexpected_error_is_a_failure_not_the_end():
    class Buggy(_Driver):
        def release(self, uuid):
            raise KeyError(uuid)

    out, _ = _run(Buggy([(['a'], set())] * 3), budget=2.0)
    assert out.failed == {'a': "unexpected KeyError: 'a'"}
