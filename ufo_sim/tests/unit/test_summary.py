import math
import re

from ufo_sim.experiments import mal
from ufo_sim.experiments import summary


def _r(manager, cell, cpus, ok):
    return {'manager': manager, 'cell': cell, 'cpus': cpus, 'qos_met': ok,
            'p99_us': [1.0, 1.0], 'detail': {}}


RESULTS = [
    _r('ufo', 'a@10+a@10', 4, True), _r('dyniso', 'a@10+a@10', 8, True),
    _r('oracle', 'a@10+a@10', 4, True),
    _r('ufo', 'a@10+a@50', 8, True), _r('dyniso', 'a@10+a@50', 10, True),
    _r('oracle', 'a@10+a@50', 6, True),
    _r('ufo', 'a@50+a@50', 16, True), _r('dyniso', 'a@50+a@50', 16, False),
    _r('oracle', 'a@50+a@50', 14, True),
    # Over the budget counts as infeasible even with QoS met.
    _r('ufo', 'a@50+a@10', 16, False), _r('dyniso', 'a@50+a@10', 18, True),
    _r('oracle', 'a@50+a@10', None, False),
]


def _per_cell(manager, cpus, met):
    """One result per cell of RESULTS, in its order."""
    cells = ('a@10+a@10', 'a@10+a@50', 'a@50+a@50', 'a@50+a@10')
    return [_r(manager, c, n, ok) for c, n, ok in zip(cells, cpus, met)]


def test_figures():
    f = summary.figures(RESULTS, 16)
    # Savings only over cells both meet: (8-4)/8 and (10-8)/10.
    assert f['ufo_vs_dyniso_core_saving_avg'] == (50.0 + 20.0) / 2
    assert f['ufo_vs_dyniso_core_saving_max'] == 50.0
    # UFO - Oracle over a@10+a@10, a@10+a@50, a@50+a@50.
    assert f['ufo_over_oracle_cores'] == (0 + 2 + 2) / 3
    assert f['ufo_qos_feasible_cells_pct'] == 75.0
    assert f['dyniso_qos_feasible_cells_pct'] == 50.0
    assert f['cells'] == 4
    assert f['ufo_over_oracle_ratio'] == (1.0 + 8 / 6 + 16 / 14) / 3
    # UFO's and the Oracle's saving over the same cells, all three meet.
    assert f['cells_compared_all_three'] == 2
    assert f['ufo_vs_dyniso_core_saving_avg_common'] == (50.0 + 20.0) / 2
    assert f['oracle_vs_dyniso_core_saving_avg'] == (50.0 + 40.0) / 2


def test_figures_restricted_to_cells():
    f = summary.figures(RESULTS, 16, cells=['a@50+a@50'])
    assert math.isnan(f['ufo_vs_dyniso_core_saving_avg'])
    assert f['ufo_qos_feasible_cells_pct'] == 100.0
    assert f['dyniso_qos_feasible_cells_pct'] == 0.0


def test_host_only_figures_stand_beside_ufo():
    host_only = _per_cell('ufo-host-only', (8, 12, 16, 16),
                          (True, True, False, False))
    f = summary.figures(RESULTS + host_only, 16)
    assert f['host_only_qos_feasible_cells_pct'] == 50.0
    assert f['host_only_over_oracle_ratio'] == (8 / 4 + 12 / 6) / 2
    assert f['host_only_over_ufo_ratio'] == (8 / 4 + 12 / 8) / 2
    assert f['host_only_vs_dyniso_core_saving_avg'] == (0.0 - 20.0) / 2
    line = summary.result_line(f)
    assert 'host_only_over_oracle_ratio=2.00' in line
    assert 'ufo-host-only_cpus_mean_avg=' in line
    # Without the host-only agent, no such figures.
    assert 'host_only_over_oracle_ratio' not in summary.figures(RESULTS, 16)


def test_wide_oracle_figures_stand_beside_the_oracle():
    wide = _per_cell('oracle-wide', (4, 4, 12, 12), (True,) * 4)
    f = summary.figures(RESULTS + wide, 16)
    assert f['oracle_wide_qos_feasible_cells_pct'] == 100.0
    assert f['oracle_wide_over_oracle_ratio'] == (1 + 4 / 6 + 12 / 14) / 3
    assert f['ufo_over_oracle_wide_ratio'] == (1 + 8 / 4 + 16 / 12) / 3
    line = summary.result_line(f)
    assert 'ufo_over_oracle_wide_ratio=1.44' in line
    assert 'oracle_wide_over_oracle_ratio' not in summary.figures(
        RESULTS, 16)


def test_result_line_format():
    line = summary.result_line(summary.figures(RESULTS, 16))
    pattern = (r'^RESULT ufo_vs_dyniso_core_saving_avg=-?[0-9.]+ '
               r'ufo_vs_dyniso_core_saving_max=-?[0-9.]+ '
               r'ufo_over_oracle_cores=-?[0-9.]+ '
               r'ufo_qos_feasible_cells_pct=[0-9.]+ '
               r'dyniso_qos_feasible_cells_pct=[0-9.]+ '
               r'ufo_over_oracle_ratio=[0-9.]+ '
               r'oracle_vs_dyniso_core_saving_avg=-?[0-9.]+ '
               r'ufo_vs_dyniso_core_saving_avg_common=-?[0-9.]+ '
               r'dyniso_cpus_mean_avg=nan dyniso_cpus_max_max=nan '
               r'ufo_cpus_mean_avg=nan ufo_cpus_max_max=nan '
               r'oracle_cpus_mean_avg=nan oracle_cpus_max_max=nan$')
    assert re.match(pattern, line), line


def test_mal_per_cpu_count():
    cells = ['a@10+a@10', 'a@10+a@50', 'a@50+a@50', 'a@50+a@10']
    curve = mal.mal(RESULTS, 'ufo', cells, [2, 4, 8, 16], 16)
    assert curve == {2: None, 4: 20, 8: 60, 16: 100}
    other = mal.mal(RESULTS, 'dyniso', cells, [2, 4, 8, 16], 16)
    assert other == {2: None, 4: None, 8: 20, 16: 60}
    avg, top = mal.gain(curve, other)
    assert (avg, top) == ((200.0 + 66.66666666666667) / 2, 200.0)
