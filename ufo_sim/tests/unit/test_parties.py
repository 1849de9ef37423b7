import pytest

from ufo_sim.managers import parties


def _loop(**kw):
    vms = kw.pop('vms', {'a': (2, 4, 100.0), 'b': (2, 4, 100.0)})
    return parties.PartiesLoop(kw.pop('budget', 8), vms, **kw)


def test_violator_grows_from_free_cores():
    loop = _loop()
    assert loop.step(10.0, {'a': 150.0, 'b': 90.0}) == {'a': 3, 'b': 2}


def test_slack_shrinks_one_vm_per_interval():
    loop = _loop()
    cores = loop.step(10.0, {'a': 10.0, 'b': 50.0})
    # The VM with the most slack gives a core back; only one moves.
    assert cores == {'a': 1, 'b': 2}


def test_no_shrink_without_enough_slack():
    loop = _loop()
    assert loop.step(10.0, {'a': 85.0, 'b': 90.0}) == {'a': 2, 'b': 2}


def test_settle_time_holds_a_changed_vm():
    loop = _loop(settle=2.0)
    loop.step(10.0, {'a': 150.0, 'b': 90.0})
    # One second later a is still settling: its p99 is not used.
    assert loop.step(11.0, {'a': 500.0, 'b': 90.0}) == {'a': 3, 'b': 2}
    assert loop.step(12.0, {'a': 500.0, 'b': 90.0}) == {'a': 4, 'b': 2}


def test_failed_downsize_reverts_and_backs_off():
    loop = _loop(settle=1.0, backoff=30.0)
    loop.step(10.0, {'a': 10.0, 'b': 90.0})          # a: 2 -> 1
    assert loop.step(11.0, {'a': 120.0, 'b': 90.0}) == {'a': 2, 'b': 2}
    # Plenty of slack again, but a does not retry 1 core during backoff.
    assert loop.step(12.0, {'a': 10.0, 'b': 90.0}) == {'a': 2, 'b': 2}
    assert loop.step(42.0, {'a': 10.0, 'b': 90.0}) == {'a': 1, 'b': 2}


def test_full_budget_takes_from_vm_with_slack():
    loop = _loop(budget=4)
    assert loop.step(10.0, {'a': 200.0, 'b': 20.0}) == {'a': 3, 'b': 1}


def test_full_budget_without_donor_stays():
    loop = _loop(budget=4)
    assert loop.step(10.0, {'a': 200.0, 'b': 95.0}) == {'a': 2, 'b': 2}


def test_max_cores_is_a_ceiling():
    loop = _loop(vms={'a': (4, 4, 100.0)})
    assert loop.step(10.0, {'a': 1000.0}) == {'a': 4}


def test_budget_checked():
    with pytest.raises(ValueError):
        _loop(budget=3)
