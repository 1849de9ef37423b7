"""The pure decisions of the overload-relief migration strategy."""

import pytest

from ufo_agent import hostsignal
from ufo_nova import migration

O, S, U = hostsignal.OVERLOADED, hostsignal.SATURATED, hostsignal.UNDERLOADED
NOW = 10000.0
PARAMS = dict(sustain_s=300, max_age_s=120, cooldown_s=1800,
              max_migrations=4, fraction=0.5)


def sig(state, t, idle=0, reclaimable=None, unmet=0, managed=32):
    if reclaimable is None:
        reclaimable = idle
    return hostsignal.HostSignal(
        state=state, idle_cores=idle, reclaimable_cores=reclaimable,
        managed_cores=managed, unmet_cores=unmet, sequence=int(t),
        timestamp=float(t), source='agent')


def overloaded_for(seconds, unmet=3, step=60):
    """Overloaded signals every ``step`` s for ``seconds`` up to NOW."""
    times = range(int(NOW - seconds), int(NOW) + 1, step)
    return [sig(U, NOW - seconds - step, idle=4)] + [
        sig(O, t, unmet=unmet) for t in times]


def quiet(idle, reclaimable=None, state=U):
    return [sig(state, NOW - 10, idle=idle, reclaimable=reclaimable)]


def vm(uuid, vcpus, cls=migration.BE, cores=None, memory_mb=0):
    return migration.Instance(uuid, vcpus, cls, cores, memory_mb)


def decide(histories, instances, **kw):
    params = dict(PARAMS, **kw)
    return migration.decide(histories, instances, NOW, **params)


# overload_start


def test_overload_start_is_the_first_signal_of_the_unbroken_run():
    history = [sig(O, 100), sig(U, 200), sig(O, 300), sig(O, 360),
               sig(O, 420)]
    assert migration.overload_start(history, 450, 120) == 300


def test_a_gap_longer_than_max_age_breaks_the_run():
    history = [sig(O, 100), sig(O, 300), sig(O, 360)]
    assert migration.overload_start(history, 400, 120) == 300
    assert migration.overload_start(history, 400, 200) == 100


def test_no_overload_start_when_not_overloaded_or_stale():
    assert migration.overload_start([], NOW, 120) is None
    assert migration.overload_start([sig(O, 0), sig(S, 60)], 60, 120) is None
    # Overloaded, but the agent has been silent for longer than max_age.
    assert migration.overload_start([sig(O, 0)], 121, 120) is None
    assert migration.overload_start([sig(O, 0)], 120, 120) == 0


def test_history_reaching_no_further_counts_from_its_first_signal():
    assert migration.overload_start([sig(O, 50), sig(O, 100)], 100,
                                    120) == 50


# Sources


def test_no_move_without_sustained_overload():
    histories = {'a': overloaded_for(240), 'b': quiet(16)}
    d = decide(histories, {'a': [vm('x', 4)]})
    assert d.moves == () and d.held == ()


def test_sustained_overload_moves_to_an_underloaded_host():
    histories = {'a': overloaded_for(300), 'b': quiet(16)}
    d = decide(histories, {'a': [vm('x', 4)]})
    assert [(m.instance, m.source, m.destination) for m in d.moves] == [
        ('x', 'a', 'b')]
    move = d.moves[0]
    assert move.vcpus == 4 and move.needed_cores == 2
    assert 'a overloaded for at least 300 s (unmet 3 cores)' in move.reason
    assert 'BE x (4 vCPUs, gives back 2 cores)' in move.reason
    assert 'b underloaded with 16 reclaimable, 16 idle cores >= 2 ' \
           'needed' in move.reason


def test_a_saturated_signal_in_between_restarts_the_clock():
    history = overloaded_for(600)
    history.insert(-2, sig(S, NOW - 90))
    d = decide({'a': history, 'b': quiet(16)}, {'a': [vm('x', 4)]})
    assert d.moves == ()


def test_a_stale_overloaded_host_is_not_a_source():
    history = [sig(O, t, unmet=3) for t in range(int(NOW) - 900,
                                                 int(NOW) - 200, 60)]
    d = decide({'a': history, 'b': quiet(16)}, {'a': [vm('x', 4)]})
    assert d.moves == ()


# Which instance


def test_smallest_instance_that_covers_the_shortfall():
    inst = [vm('big', 16, cores=8.0), vm('fits', 4, cores=3.0),
            vm('small', 2, cores=1.0)]
    d = decide({'a': overloaded_for(400, unmet=3), 'b': quiet(20)},
               {'a': inst})
    assert [m.instance for m in d.moves] == ['fits']
    assert 'covers the shortfall' in d.moves[0].reason


def test_be_preferred_over_a_smaller_lc_that_also_covers():
    inst = [vm('lc', 2, migration.LC, cores=2.0),
            vm('be', 4, migration.BE, cores=2.5)]
    d = decide({'a': overloaded_for(400, unmet=2), 'b': quiet(20)},
               {'a': inst})
    assert [m.instance for m in d.moves] == ['be']


def test_lc_moves_when_no_be_covers():
    inst = [vm('lc', 4, migration.LC, cores=3.0),
            vm('be', 2, migration.BE, cores=1.0)]
    d = decide({'a': overloaded_for(400, unmet=3), 'b': quiet(20)},
               {'a': inst})
    assert [m.instance for m in d.moves] == ['lc']
    assert 'LC lc' in d.moves[0].reason


def test_unknown_use_counts_the_flavors_expected_cores():
    # 8 vCPUs x 0.5 = 4 cores cover 4; 6 vCPUs give 3, which do not.
    inst = [vm('six', 6), vm('eight', 8)]
    d = decide({'a': overloaded_for(400, unmet=4), 'b': quiet(20)},
               {'a': inst})
    assert [m.instance for m in d.moves] == ['eight']


def test_when_none_covers_the_one_giving_back_most_moves():
    inst = [vm('a1', 2, cores=1.0), vm('a2', 4, migration.LC, cores=2.0),
            vm('a3', 4, cores=2.0)]
    d = decide({'a': overloaded_for(400, unmet=6), 'b': quiet(20)},
               {'a': inst})
    assert [m.instance for m in d.moves] == ['a3']
    assert 'relieves it most (none covers it alone)' in d.moves[0].reason


def test_cooldown_skips_recently_migrated_instances():
    inst = [vm('recent', 2, cores=3.0), vm('other', 8, cores=3.0)]
    histories = {'a': overloaded_for(400), 'b': quiet(20)}
    d = decide(histories, {'a': inst},
               last_migrated={'recent': NOW - 1799})
    assert [m.instance for m in d.moves] == ['other']
    d = decide(histories, {'a': inst},
               last_migrated={'recent': NOW - 1800})
    assert [m.instance for m in d.moves] == ['recent']


def test_everything_in_cooldown_holds_the_host():
    d = decide({'a': overloaded_for(400), 'b': quiet(20)},
               {'a': [vm('x', 2)]}, last_migrated={'x': NOW - 60})
    assert d.moves == ()
    assert d.held == (('a', 'no instance that may move (none, or all '
                       'migrated less than 1800 s ago)'),)


# Destinations


def test_destination_with_most_reclaimable_cores():
    histories = {'a': overloaded_for(400), 'b': quiet(4, reclaimable=6),
                 'c': quiet(4, reclaimable=10), 'd': quiet(30, state=S)}
    d = decide(histories, {'a': [vm('x', 4)]})
    assert [m.destination for m in d.moves] == ['c']


def test_destination_ties_break_by_name():
    histories = {'a': overloaded_for(400), 'c': quiet(8), 'b': quiet(8)}
    d = decide(histories, {'a': [vm('x', 4)]})
    assert [m.destination for m in d.moves] == ['b']


def test_never_to_an_overloaded_saturated_stale_or_unknown_host():
    histories = {
        'a': overloaded_for(400),
        'over': overloaded_for(100),
        'sat': quiet(30, state=S),
        'stale': [sig(U, NOW - 121, idle=30)],
        'empty': [],
    }
    d = decide(histories, {'a': [vm('x', 2)]})
    assert d.moves == ()
    assert d.held == (('a', 'no underloaded host with a fresh signal has '
                       'room for any of its 1 movable instances'),)


def test_destination_idle_cores_must_fit_the_expected_cores():
    histories = {'a': overloaded_for(400), 'b': quiet(3, reclaimable=30)}
    # 8 vCPUs x 0.5 = 4 cores > 3 idle.
    assert decide(histories, {'a': [vm('x', 8)]}).moves == ()
    # A recent use above the flavor's expectation counts.
    assert decide(histories, {'a': [vm('x', 4, cores=3.5)]}).moves == ()
    assert decide(histories, {'a': [vm('x', 6, cores=0.2)]}).moves[
        0].needed_cores == 3


def test_next_instance_tried_when_the_preferred_fits_nowhere():
    inst = [vm('be', 8, cores=4.0), vm('lc', 4, migration.LC, cores=3.0)]
    d = decide({'a': overloaded_for(400, unmet=3), 'b': quiet(3)},
               {'a': inst})
    assert [m.instance for m in d.moves] == ['lc']


def test_nova_capacity_checked_when_given():
    histories = {'a': overloaded_for(400), 'b': quiet(20), 'c': quiet(10)}
    inst = {'a': [vm('x', 4, memory_mb=4096)]}
    cap = {'b': migration.Capacity(vcpus=3, memory_mb=1e6),
           'c': migration.Capacity(vcpus=64, memory_mb=4096)}
    assert [m.destination for m in decide(histories, inst,
                                          capacity=cap).moves] == ['c']
    cap['c'] = migration.Capacity(vcpus=64, memory_mb=4095)
    assert decide(histories, inst, capacity=cap).moves == ()
    # A host Nova reports nothing for has no room.
    assert decide(histories, inst, capacity={}).moves == ()


# Several hosts


def test_one_move_per_host_worst_first_within_max_migrations():
    histories = {'a': overloaded_for(400, unmet=2),
                 'b': overloaded_for(400, unmet=5),
                 'c': overloaded_for(900, unmet=2),
                 'd': quiet(30)}
    inst = {h: [vm(h + '1', 2, cores=6.0), vm(h + '2', 2, cores=6.0)]
            for h in 'abc'}
    d = decide(histories, inst, max_migrations=2)
    assert [(m.source, m.instance) for m in d.moves] == [('b', 'b1'),
                                                         ('c', 'c1')]
    assert d.held == (('a', 'max_migrations (2) reached in this audit'),)
    assert len(decide(histories, inst).moves) == 3


def test_moves_of_one_audit_use_up_the_destinations_idle_cores():
    histories = {'a': overloaded_for(400), 'b': overloaded_for(400),
                 'd': quiet(5, reclaimable=9), 'e': quiet(4, reclaimable=8)}
    inst = {'a': [vm('x', 8)], 'b': [vm('y', 8)]}
    d = decide(histories, inst)
    # x takes 4 of d's cores: 1 idle left, so y goes to e.
    assert [(m.instance, m.destination) for m in d.moves] == [('x', 'd'),
                                                              ('y', 'e')]


def test_zero_max_migrations_moves_nothing():
    d = decide({'a': overloaded_for(400), 'b': quiet(20)},
               {'a': [vm('x', 2)]}, max_migrations=0)
    assert d.moves == ()
    assert d.held[0][0] == 'a'


@pytest.mark.parametrize('unmet', [0, 1])
def test_any_instance_covers_a_small_shortfall(unmet):
    inst = [vm('lc', 1, migration.LC), vm('be', 4)]
    d = decide({'a': overloaded_for(400, unmet=unmet), 'b': quiet(20)},
               {'a': inst})
    assert [m.instance for m in d.moves] == ['be']
