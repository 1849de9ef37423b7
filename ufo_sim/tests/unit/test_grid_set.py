"""``ufo-sim grid-set``: the held-out grid protocol as one command."""

import json
import os

import pytest

from ufo_sim import cmd
from ufo_sim.commands import common
from ufo_sim.engine import spec as spec_mod
from ufo_sim.experiments import grid_set

# One cell of one pair at one load, one seed: a real grid, a few seconds
# of CPU.
TINY = grid_set.SetRun('tiny', 'one cell', loads=(0.2,),
                       mixes=('nginx+nginx',), seeds=1)


def _result(cell, manager, cpus, met):
    return {'cell': cell, 'manager': manager, 'cpus': cpus,
            'cpus_max': cpus, 'cpus_mean': cpus, 'qos_met': met,
            'qos_violation_s': 0.0, 'p99_us': [1.0], 'detail': {}}


def _record(name, results, cores=8, ratio=1.1, misses=(), ufo_config=()):
    return {'name': name, 'settings': {'cores': cores, 'smt': 2, 'seed': 1,
                                       'ufo_config': list(ufo_config)},
            'loads': [0.3], 'mixes': ['nginx+nginx'],
            'managers': ['ufo', 'oracle'], 'conditions': 'c',
            'summary': {'ufo_over_oracle_ratio': ratio},
            'oracle_met_ufo_missed': list(misses), 'results': results}


def test_protocol_holds_the_documented_runs_with_their_values():
    names = [r.name for r in grid_set.PROTOCOL]
    assert len(names) == len(set(names))
    assert grid_set.HELD_OUT[:8] == ('H1', 'H2', 'H3', 'H4', 'H5', 'H6',
                                     'H7', 'H8')
    assert len([n for n in grid_set.HELD_OUT if n.startswith('H9')]) == 16
    assert 'quick' not in grid_set.HELD_OUT
    # Three seeds per cell in every grid; H1-H3 share none.
    assert all(r.settings().seeds >= 3 for r in grid_set.PROTOCOL)
    seeds = [set(range(r.seed, r.seed + r.seeds)) for r in (
        grid_set.BY_NAME['H1'], grid_set.BY_NAME['H2'],
        grid_set.BY_NAME['H3'])]
    assert not (seeds[0] & seeds[1] or seeds[1] & seeds[2] or
                seeds[0] & seeds[2])
    h8 = grid_set.BY_NAME['H8'].settings()
    assert (h8.cores, h8.smt, h8.budget) == (16, 1, 16)
    assert grid_set.BY_NAME['H5'].settings().vcpus == (('*', 4),)
    quick = grid_set.BY_NAME['quick'].settings()
    assert (quick.converge, quick.judge) == (20, 6)
    # H9 moves the SMT slowdowns' excess over 1, the others' values.
    smt = dict(grid_set.BY_NAME['H9-smt-x0.7'].host_options)
    assert smt['smt_slowdown'] == pytest.approx(
        1 + (spec_mod.HostSpec.smt_slowdown - 1) * 0.7)
    assert set(smt) == {'smt_slowdown', 'smt_cross_slowdown',
                        'smt_emu_slowdown'}
    emu = dict(grid_set.BY_NAME['H9-emu_wakeup+irq_inject-x1.3']
               .host_options)
    assert emu['irq_inject'] == pytest.approx(
        spec_mod.HostSpec.irq_inject * 1.3)
    # Each H9 grid builds a host.
    for name in grid_set.HELD_OUT:
        run = grid_set.BY_NAME[name]
        common.checked(run.settings(), run.first_cells())


def test_misses_are_oracle_met_cells_ufo_misses_within_the_budget():
    results = [_result('a', 'oracle', 10, True), _result('a', 'ufo', 12,
                                                         True),
               _result('b', 'oracle', 12, True), _result('b', 'ufo', 16,
                                                         False),
               _result('c', 'oracle', 16, True), _result('c', 'ufo', 18,
                                                         True),
               _result('d', 'oracle', 18, True), _result('d', 'ufo', 18,
                                                         False)]
    # c: UFO over the budget is a miss; d: the Oracle over it is no cell.
    assert grid_set.oracle_met_misses(results, 16) == ['b', 'c']
    assert grid_set.met_cells(results, 'ufo', 16) == ['a']


def test_the_table_gives_each_run_its_yardstick_and_the_set_recall():
    one = _record('H1', [_result('a', 'oracle', 8, True),
                         _result('a', 'ufo', 10, True),
                         _result('b', 'oracle', 12, True),
                         _result('b', 'ufo', 16, False)])
    two = _record('H2', [_result('a', 'oracle', 8, True),
                         _result('a', 'ufo', 20, True)])
    for rec in (one, two):
        rec.update(met={'ufo': 0, 'oracle': 0}, result_line='RESULT x=1',
                   yardstick_line='RESULT seeds_per_cell=3.00')
    grid = {'runs': [one, two]}
    assert grid_set.recall(grid) == {'oracle_met_cells': 3,
                                     'both_met_cells': 1,
                                     'ufo_recall_pct': 100.0 / 3}
    lines = grid_set.table(grid).splitlines()
    assert lines[-5:] == [
        'RESULT run=H1 seeds_per_cell=3.00', 'RESULT run=H1 x=1',
        'RESULT run=H2 seeds_per_cell=3.00', 'RESULT run=H2 x=1',
        'RESULT grid_set_oracle_met_cells=3 grid_set_both_met_cells=1 '
        'grid_set_ufo_recall_pct=33.33']


def test_compare_pairs_cells_and_names_what_was_lost_and_added():
    base = {'runs': [
        _record('H1', [_result('a', 'ufo', 8, True),
                       _result('b', 'ufo', 8, False)], misses=['b']),
        _record('H2', [])]}
    new = {'runs': [
        _record('H1', [_result('a', 'ufo', 8, False),
                       _result('b', 'ufo', 8, True)], ratio=1.0,
                misses=['a'], ufo_config=[['pcu_high', 0.9]]),
        _record('H3', [])]}
    out = grid_set.compare(base, new)
    row, = out['runs']
    assert row['lost'] == ['a'] and row['gained'] == ['b']
    assert row['misses_added'] == ['a'] and row['ratio'] == (1.1, 1.0)
    assert (out['only_in_base'], out['only_in_new']) == (['H2'], ['H3'])
    text = grid_set.compare_table(out)
    assert text.splitlines()[-1] == (
        'RESULT grid_set_cells_lost=1 grid_set_cells_gained=1 '
        'grid_set_oracle_met_misses_added=1')
    # A run of the same name on another host is not compared.
    other = {'runs': [_record('H1', [], cores=12)]}
    with pytest.raises(ValueError, match='H1 is another grid'):
        grid_set.compare(base, other)


def test_a_real_grid_and_the_oracle_reused_with_other_ufo_options(
        monkeypatch):
    data, first = grid_set.run_one(TINY, ('ufo', 'oracle'))
    assert not first['oracle_reused']
    assert {r['manager'] for r in first['results']} == {'ufo', 'oracle'}
    assert first['result_line'].startswith('RESULT ')
    assert data['timing']['oracle'][0] == 1
    base = {'runs': [first]}
    options = (('pcu_high', 0.9),)
    oracle = grid_set._oracle_of(base, TINY)
    assert [r['manager'] for r in oracle] == ['oracle']
    data, again = grid_set.run_one(TINY, ('ufo', 'oracle'), options,
                                   oracle=oracle)
    assert again['oracle_reused'] and 'oracle' not in data['timing']
    assert [r for r in again['results'] if r['manager'] == 'oracle'] == \
        oracle
    assert again['settings']['ufo_config'] == [['pcu_high', 0.9]]
    # Another grid (other loads) does not take them.
    other = grid_set.SetRun('tiny', 'one cell', loads=(0.3,),
                            mixes=('nginx+nginx',))
    assert grid_set._oracle_of(base, other) is None
    # The first grid saved, taken into a set as it is; not as another
    # grid, nor as a grid of other UFO options.
    saved = json.loads(json.dumps(data))
    monkeypatch.setitem(grid_set.BY_NAME, 'tiny', TINY)
    out = grid_set.run([], ufo_config=options, saved={'tiny': saved})
    assert out['runs'][0]['results'] == again['results']
    with pytest.raises(ValueError, match='ran UFO with options'):
        grid_set.check_saved({'tiny': saved})
    monkeypatch.setitem(grid_set.BY_NAME, 'tiny', other)
    with pytest.raises(ValueError, match='saved grid is not one cell'):
        grid_set.check_saved({'tiny': saved}, options)


def test_cmd_runs_named_grids_and_compares_with_a_saved_set(tmp_path,
                                                            monkeypatch,
                                                            capsys):
    monkeypatch.setitem(grid_set.BY_NAME, 'tiny', TINY)
    out = tmp_path / 'base'
    assert cmd.main(['grid-set', '--run', 'tiny', '--processes', '1',
                     '--out', str(out)]) == 0
    saved = json.loads((out / 'grid-set.json').read_text())
    assert [r['name'] for r in saved['runs']] == ['tiny']
    assert os.path.exists(out / 'tiny' / 'grid.json')
    printed = capsys.readouterr().out
    assert 'RESULT run=tiny ' in printed
    new = tmp_path / 'new'
    assert cmd.main(['grid-set', '--run', 'tiny', '--processes', '1',
                     '--out', str(new), '--oracle-from',
                     str(out / 'grid-set.json'), '--against',
                     str(out / 'grid-set.json')]) == 0
    printed = capsys.readouterr().out
    assert 'RESULT grid_set_cells_lost=0 grid_set_cells_gained=0' in printed
    again = json.loads((new / 'grid-set.json').read_text())
    assert again['runs'][0]['oracle_reused']
    # A set from saved grids alone simulates nothing; a saved grid of
    # other UFO options is refused with the flag named.
    only = tmp_path / 'only'
    assert cmd.main(['grid-set', '--out', str(only), '--from-grid',
                     'tiny=%s' % (out / 'tiny' / 'grid.json')]) == 0
    rebuilt = json.loads((only / 'grid-set.json').read_text())
    assert rebuilt['runs'][0]['results'] == saved['runs'][0]['results']
    assert not os.path.exists(only / 'tiny')
    with pytest.raises(SystemExit):
        cmd.main(['grid-set', '--out', str(only), '--ufo-option',
                  'pcu_high=0.9', '--from-grid',
                  'tiny=%s' % (out / 'tiny' / 'grid.json')])
    assert '--from-grid' in capsys.readouterr().err


def test_cmd_refuses_an_unknown_grid_and_a_file_that_is_no_set(tmp_path):
    with pytest.raises(SystemExit):
        cmd.main(['grid-set', '--run', 'H10'])
    bad = tmp_path / 'x.json'
    bad.write_text('[]')
    with pytest.raises(SystemExit):
        cmd.main(['grid-set', '--run', 'H1', '--against', str(bad),
                  '--out', str(tmp_path)])
