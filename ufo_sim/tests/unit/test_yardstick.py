"""The grid's yardstick: seeds shared by the managers, UFO by the Oracle."""

import math

import pytest

from ufo_sim.experiments import grid as grid_mod
from ufo_sim.experiments import report
from ufo_sim.experiments import summary
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import registry
from ufo_sim.managers import scenario


def _seed_row(seed, cpus, met, p99, violation=0.0, error=None):
    detail = {'vm_cores': [seed, seed]}
    if error:
        detail['error'] = error
    return {'manager': 'ufo', 'cell': 'memcached@20+nginx@50',
            'cpus': cpus, 'qos_met': met, 'p99_us': list(p99),
            'detail': detail, 'cpus_max': cpus, 'cpus_mean': cpus,
            'qos_violation_s': violation, 'seed': seed}


def test_a_cell_is_met_only_when_it_is_met_on_every_seed():
    rows = [_seed_row(2, 10, True, (50.0, 300.0)),
            _seed_row(1, 8, True, (100.0, 200.0)),
            _seed_row(3, 12, False, (400.0, math.inf), violation=3.0)]
    out = grid_mod.combine(rows, (200.0, 1000.0))
    assert out['qos_met'] is False
    assert out['cpus'] == 10.0
    assert out['cpus_max'] == 12 and out['cpus_mean'] == 10.0
    assert out['qos_violation_s'] == 1.0
    # Each VM's worst p99 over the seeds, and over its target.
    assert out['p99_us'] == [400.0, math.inf]
    assert out['p99_over_target'] == [2.0, math.inf]
    # The first seed's detail; every seed's figures, in seed order.
    assert out['detail'] == {'vm_cores': [1, 1]}
    assert [s['seed'] for s in out['seeds']] == [1, 2, 3]
    assert out['seeds'][0]['p99_over_target'] == [0.5, 0.2]
    assert 'seed' not in out
    rows[0]['qos_met'] = rows[2]['qos_met'] = True
    assert grid_mod.combine(rows, (200.0, 1000.0))['qos_met'] is True


def test_a_seed_without_cpus_or_with_an_error_shows_in_the_cell():
    rows = [_seed_row(1, 8, True, (1.0,)),
            _seed_row(2, None, False, (math.inf,), error='timeout: late')]
    out = grid_mod.combine(rows, (10.0,))
    assert out['cpus'] is None and not out['qos_met']
    assert out['cpus_max'] == 8
    assert out['detail']['error'] == 'seed 2: timeout: late'


def _r(manager, cell, cpus, met, ratio=0.5, seeds=3, mean=None,
       violation=0.0):
    return {'manager': manager, 'cell': cell, 'cpus': cpus, 'qos_met': met,
            'p99_us': [1.0, 1.0], 'p99_over_target': [0.1, ratio],
            'detail': {}, 'cpus_max': mean or cpus,
            'cpus_mean': mean or cpus, 'qos_violation_s': violation,
            'seeds': [{}] * seeds}


# Both meet a@10+a@10 and a@10+a@50; only the Oracle a@50+a@10 (UFO
# 1.5 over the target) and a@50+a@50 (UFO held 16 CPUs, over the budget
# of 14); UFO only a@10+a@90; neither a@90+a@90 (the Oracle's best is
# 20 CPUs, over the budget).
YARD = [
    _r('ufo', 'a@10+a@10', 4, True), _r('oracle', 'a@10+a@10', 4, True),
    _r('dyniso', 'a@10+a@10', 8, True),
    _r('ufo', 'a@10+a@50', 9, True), _r('oracle', 'a@10+a@50', 6, True),
    _r('dyniso', 'a@10+a@50', 12, True),
    _r('ufo', 'a@50+a@10', 8, False, ratio=1.5),
    _r('oracle', 'a@50+a@10', 8, True), _r('dyniso', 'a@50+a@10', 10, True),
    _r('ufo', 'a@50+a@50', 16, True, ratio=0.9),
    _r('oracle', 'a@50+a@50', 12, True),
    _r('dyniso', 'a@50+a@50', 14, False),
    _r('ufo', 'a@10+a@90', 12, True),
    _r('oracle', 'a@10+a@90', None, False, mean=20),
    _r('dyniso', 'a@10+a@90', 14, True),
    _r('ufo', 'a@90+a@90', 14, False, ratio=3.0, mean=13, violation=4.0),
    _r('oracle', 'a@90+a@90', None, False, mean=20, seeds=4),
    _r('dyniso', 'a@90+a@90', 14, False),
]


def test_the_yardstick_sets_ufo_beside_the_oracle_cell_by_cell():
    f = summary.figures(YARD, 14)
    assert f['seeds_per_cell'] == 3
    assert (f['oracle_met_cells'], f['ufo_met_cells'],
            f['both_met_cells'], f['oracle_only_cells'],
            f['ufo_only_cells'], f['neither_met_cells']) == (4, 3, 2, 2, 1,
                                                             1)
    assert f['ufo_recall_pct'] == 50.0
    assert f['both_met_ufo_over_oracle_ratio'] == pytest.approx(
        (4 / 4 + 9 / 6) / 2)
    assert f['both_met_ufo_over_oracle_ratio'] == f['ufo_over_oracle_ratio']
    assert f['oracle_only_misses'] == {'a@50+a@10': 1.5, 'a@50+a@50': 0.9}
    assert f['oracle_only_ufo_p99_over_target_median'] == pytest.approx(1.2)
    assert f['oracle_only_ufo_p99_over_target_max'] == 1.5
    assert f['neither_ufo_cpus_avg'] == 13
    assert f['neither_ufo_violation_s_avg'] == 4.0
    assert f['neither_oracle_cpus_avg'] == 20
    # Savings over the cells UFO and DynIso both meet.
    assert f['ufo_vs_dyniso_core_saving_avg'] == pytest.approx(
        (50.0 + 25.0 + 100.0 * 2 / 14) / 3)
    assert (f['paper_saving_avg'], f['paper_saving_max']) == (22.0, 50.0)


def test_a_miss_with_no_p99_counts_as_infinitely_large():
    rows = [dict(r) for r in YARD]
    for r in rows:
        if r['manager'] == 'ufo' and r['cell'] == 'a@50+a@10':
            r['p99_over_target'] = [None, 0.2]
    f = summary.figures(rows, 14)
    assert f['oracle_only_ufo_p99_over_target_max'] == math.inf


def test_without_the_oracle_there_is_no_yardstick():
    f = summary.figures([r for r in YARD if r['manager'] != 'oracle'], 14)
    assert 'ufo_recall_pct' not in f
    assert 'ufo_recall_pct=' not in summary.yardstick_line(f)


def test_the_summary_carries_the_mixes_savings_and_the_yardstick_line():
    a = {'ufo_vs_dyniso_core_saving_avg': 10.0}
    b = {'ufo_vs_dyniso_core_saving_avg': 30.0}
    none = {'ufo_vs_dyniso_core_saving_avg': float('nan')}
    out = summary.by_mix({'x+x': a, 'x+y': b, 'y+y': none})
    assert out['ufo_vs_dyniso_saving_mix_avg'] == 20.0
    assert out['ufo_vs_dyniso_saving_avg.x+y'] == 30.0
    f = dict(summary.figures(YARD, 14), **out)
    line = summary.yardstick_line(f)
    words = dict(w.split('=') for w in line.split()[1:])
    assert line.startswith('RESULT seeds_per_cell=3.00 ')
    assert words['ufo_recall_pct'] == '50.00'
    assert words['oracle_only_ufo_p99_over_target_max'] == '1.50'
    assert words['ufo_vs_dyniso_saving_avg.x+x'] == '10.00'
    assert words['paper_saving_avg'] == '22.00'
    text = report.yardstick_table(f)
    assert 'recall 50.0%' in text
    assert 'a@50+a@10 1.50, a@50+a@50 0.90' in text
    assert 'x+y 30.0' in text


class _Seen(Exception):
    pass


@pytest.mark.parametrize('name', sorted(registry.MANAGERS))
def test_every_manager_runs_a_cell_on_the_cells_host_seed(
        monkeypatch, name):
    def build(cell, settings, seed, **kwargs):
        raise _Seen(seed)
    monkeypatch.setattr(scenario, 'build', build)
    cell = cell_mod.Cell((cell_mod.VmLoad('memcached', 0.2),
                          cell_mod.VmLoad('nginx', 0.5)))
    with pytest.raises(_Seen) as seen:
        registry.evaluate(name, cell, cell_mod.Settings(seed=4))
    assert seen.value.args[0] == cell.host_seed(4)
    assert cell.host_seed(4) != cell.host_seed(5)


def test_a_grid_runs_each_cell_on_each_seed_for_every_manager(monkeypatch):
    def evaluate(name, cell, settings):
        assert settings.seeds == 1
        met = name == 'oracle' or settings.seed != 3
        return cell_mod.CellResult(name, cell.key, 4 + settings.seed, met,
                                   (100.0,) * len(cell.vms), {},
                                   4 + settings.seed, 4 + settings.seed,
                                   0.0)
    monkeypatch.setattr(registry, 'evaluate', evaluate)
    settings = cell_mod.Settings(seed=2, seeds=3)
    grid = grid_mod.run(settings, (0.2, 0.5), ['ufo', 'oracle'],
                        [('memcached', 'memcached')], processes=1)
    # Four cells (one mirrored), one result per manager and cell.
    assert len(grid.results) == 8
    assert grid.timing['ufo'][0] == 3 * 3
    for r in grid.results:
        assert [s['seed'] for s in r['seeds']] == [2, 3, 4]
        assert r['cpus'] == 7.0
        assert r['qos_met'] == (r['manager'] == 'oracle')
        assert r['p99_over_target'] == [100.0 / scenario.profile(
            'memcached').qos_p99_us] * 2
    f = summary.figures(grid.results, settings.budget)
    assert (f['seeds_per_cell'], f['ufo_recall_pct']) == (3, 0.0)


def test_bad_seed_counts_are_refused():
    with pytest.raises(ValueError, match='seeds'):
        cell_mod.Settings(seeds=0)
    assert [s.seed for s in cell_mod.Settings(seed=7,
                                              seeds=2).each_seed()] == [7, 8]
