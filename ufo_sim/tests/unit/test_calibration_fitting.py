"""Random draws of the mechanisms' parameters, ranked by the rows."""

import dataclasses
import json
import math
import random
import re

import pytest

from ufo_sim.calibration import fitting
from ufo_sim.calibration import targets
from ufo_sim.engine import HostSpec


def test_distance_is_zero_inside_and_counts_widths_outside():
    bounds = (targets.Bound(15, 50),)
    assert fitting.distance({'a': 15.0, 'b': 50.0}, bounds) == 0.0
    # 5 below and 35 above a width of 35: 1/7 + 1.
    assert fitting.distance({'a': 10.0, 'b': 85.0}, bounds) == \
        pytest.approx(5 / 35 + 1)


def test_distance_of_a_bound_on_the_mean_or_one_value():
    mean = (targets.Bound(8, 28, 'mean'), targets.Bound(-5, 43))
    # Each value inside [-5, 43], their mean 30 is 2 over [8, 28].
    assert fitting.distance({'a': 40.0, 'b': 20.0}, mean) == \
        pytest.approx(2 / 20)
    one = (targets.Bound(41, 61, '4'),)
    assert fitting.distance({'2': 0.0, '4': 71.0}, one) == \
        pytest.approx(0.5)


def test_an_undefined_value_counts_one_width():
    assert fitting.distance({'a': math.nan}, (targets.Bound(0, 1),)) == 1.0


def test_draws_stay_in_their_ranges_and_repeat_with_the_seed():
    first = [fitting.draw(fitting.RANGES, random.Random(7))
             for _ in range(3)]
    again = [fitting.draw(fitting.RANGES, random.Random(7))
             for _ in range(3)]
    assert first == again
    for options in first:
        assert set(options) == set(fitting.RANGES)
        for name, value in options.items():
            low, high = fitting.RANGES[name]
            assert low <= value <= high
        # Every draw is a host the engine accepts.
        dataclasses.replace(HostSpec(), **options)


def test_default_ranges_hold_the_calibrated_values():
    for name, (low, high) in fitting.RANGES.items():
        assert low <= getattr(HostSpec, name) <= high, name


def test_ranked_by_rows_met_then_distance():
    def outcome(passed, distance):
        return fitting.Outcome({}, {}, passed, distance)

    a, b, c = outcome(('x',), 0.5), outcome(('x', 'y'), 2.0), \
        outcome(('x',), 0.1)
    assert fitting.rank([a, b, c]) == [b, c, a]


@pytest.mark.parametrize('text', [
    'cache_refill', 'cache_refill=1', 'cache_refill=2:1', 'nope=0:1',
    'cache_refill=a:b', 'guest_locks=0:1', 'cores=1:2', 'numa_nodes=1:2'])
def test_a_bad_range_names_what_is_wrong(text):
    with pytest.raises(ValueError, match='NAME=LOW:HIGH'):
        fitting.parse_range(text)


def test_a_range_in_the_fields_own_units():
    assert fitting.parse_range('lock_spin=0.0005:0.003') == \
        ('lock_spin', (0.0005, 0.003))


def test_a_range_may_name_a_profile_field():
    assert fitting.parse_range('nginx.cache_footprint=0.3:1') == (
        'nginx.cache_footprint', (0.3, 1.0))
    assert 'mysql.lock_share' in fitting.profile_fields()
    # Integer fields are not drawn uniformly; a bound must parse.
    assert 'mysql.rounds' not in fitting.profile_fields()
    with pytest.raises(ValueError, match='below 1'):
        fitting.parse_range('nginx.lock_share=0.1:1')


def test_a_draw_splits_host_and_profile_options(monkeypatch):
    seen = {}

    def run(chosen, seeds, processes, host_options, profile_options):
        seen.update(host=host_options, profile=profile_options)
        return []
    monkeypatch.setattr(targets, 'run', run)
    fitting.measure({'cache_decay': 0.01, 'nginx.cache_footprint': 0.5},
                    [fitting.ROWS[0]], 1)
    assert seen == {'host': (('cache_decay', 0.01),),
                    'profile': (('nginx.cache_footprint', 0.5),)}


def test_the_rows_scored_leave_out_fig12():
    assert 'fig12_default_pct' not in fitting.ROWS
    assert 'fig12_dyniso_pct' not in fitting.ROWS
    assert 'fig5_isolation_gain' in fitting.ROWS


def test_fit_ranks_draws_by_the_rows_and_logs_each(monkeypatch, tmp_path,
                                                   capsys):
    from ufo_sim.calibration import __main__ as cli

    def measure(ctx):
        options = dict(ctx.host_options)
        return targets.Measured({'x': options.get('smt_slowdown', 1.5)})

    monkeypatch.setattr(targets, 'TARGETS', (targets.Target(
        'opt', 'synthetic', '1.0-1.1', (targets.Bound(1.0, 1.1),),
        measure),))
    log = tmp_path / 'fit.jsonl'
    assert cli.main(['fit', '--configurations', '4', '--only', 'opt',
                     '--param', 'smt_slowdown=1.0:1.2', '--processes', '2',
                     '--draw-seed', '3', '--jsonl', str(log)]) == 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 5           # the defaults and four draws
    drawn = [o for o in lines if o['options']]
    assert len(drawn) == 4
    for o in drawn:
        value = o['options']['smt_slowdown']
        assert 1.0 <= value <= 1.2
        assert set(o['options']) == set(fitting.RANGES) | {'smt_slowdown'}
        assert o['values'] == {'opt': {'x': value}}
        assert (o['passed'] == ['opt']) == (value <= 1.1)
        assert o['distance'] == pytest.approx(max(0.0, value - 1.1) / 0.1)
    # The defaults (smt_slowdown 1.5) miss by four widths.
    assert [o['distance'] for o in lines if not o['options']] == \
        [pytest.approx(4.0)]
    printed = [line for line in capsys.readouterr().out.splitlines()
               if re.match(r' *\d+ rows met', line)]
    assert len(printed) == 5
    distances = [float(line.split('distance ')[1].split()[0])
                 for line in printed]
    met = [int(line.split()[0]) for line in printed]
    assert met == sorted(met, reverse=True)
    assert distances[-1] == pytest.approx(4.0, abs=1e-3)
    assert printed[-1].endswith('(defaults)')


def test_an_unwritable_log_fails_before_any_draw(monkeypatch, tmp_path,
                                                 capsys):
    from ufo_sim.calibration import __main__ as cli

    monkeypatch.setattr(fitting, 'run', lambda *a, **k: pytest.fail(
        'measured with nowhere to log'))
    path = tmp_path / 'missing' / 'fit.jsonl'
    assert cli.main(['fit', '--jsonl', str(path)]) == 2
    err = capsys.readouterr().err
    assert '--jsonl %s' % path in err and 'No such file' in err
