"""The cloud run's figures, RESULT lines, comparison and plot."""

import json

import pytest

from ufo_sim.cluster import metrics
from ufo_sim.cluster import plots


def _series(name='default@2', hosts=2, rows=()):
    s = metrics.Series(name, hosts, 60, 120)
    for row in rows:
        s.add(*row)
    return s


# t, hosted, lc_hosted, demand, lc_violation_s, changes, refused,
# migrations, held CPUs (all hosts)
ROWS = [(0, 10, 4, 12, 240, 0, 5, 0, 64),      # warm-up: not measured
        (60, 4, 2, 6, 0, 3, 0, 0, 10),
        (120, 4, 2, 6, 12, 1, 1, 1, 12),
        (180, 6, 2, 6, 0, 2, 0, 0, 20)]


def test_figures_after_the_warm_up():
    s = metrics.summarize(_series(rows=ROWS))
    # Steps at 120 and 180 s: 10 VM-steps of 60 s on 2 hosts, 4 LC
    # VM-steps (240 LC VM-s, 12 in violation).
    assert s['vms_per_host'] == pytest.approx(10 / 2 / 2)
    assert s['lc_violation_share'] == pytest.approx(12 / 240)
    per_hour = 12 / (240 / 3600)
    assert s['lc_violation_s_per_vm_hour'] == pytest.approx(per_hour)
    assert s['boots_refused'] == 1 and s['boots_refused_total'] == 6
    days = 120 / 86400
    assert s['migrations_per_host_day'] == pytest.approx(1 / 2 / days)
    assert s['changes_per_vm_hour'] == pytest.approx(3 / (600 / 3600))
    assert s['demand_vms'] == 6
    assert s['held_cpus_per_host'] == pytest.approx((12 + 20) / 2 / 2)
    # 5 % of LC VM-seconds in violation: over the 1 % budget.
    assert not s['meets_budget'] and s['hosts_needed'] is None
    assert 'meets_budget=no hosts_needed=none_within_budget' in \
        metrics.result_line(s, 'generated')


def test_hosts_needed_within_the_budget():
    rows = [r[:4] + (0,) + r[5:] for r in ROWS]
    s = metrics.summarize(_series(rows=rows))
    # 6 VMs asked for at 2.5 VMs per host: 3 hosts; the cloud was full
    # (4 of 6 hosted at 120 s), so the figure is not a bound.
    assert s['meets_budget'] and s['hosts_needed'] == 3
    assert not s['hosts_needed_bound']
    assert 'hosts_needed=3' in metrics.result_line(s, 'generated')
    full = [(t, d, lc, d, 0, 0, 0, 0, 0) for t, _, lc, d, *_ in ROWS]
    s = metrics.summarize(_series(rows=full))
    assert s['hosts_needed_bound']
    assert 'hosts_needed=<=2' in metrics.result_line(s, 'generated')


def test_be_work_is_a_share_of_what_the_be_threads_asked():
    s = metrics.summarize(_series(rows=ROWS))
    assert s['be_work_share'] is None
    assert 'be_work_pct=none' in metrics.result_line(s, 'generated')
    # BE work done and asked (lone-thread seconds); the warm-up's not
    # counted.
    rows = [r + be for r, be in zip(ROWS, ((0, 500), (30, 60), (50, 60),
                                           (0, 0)))]
    s = metrics.summarize(_series(rows=rows))
    assert s['be_work_share'] == pytest.approx(50 / 60)
    assert 'be_work_pct=83.3 ' in metrics.result_line(s, 'generated')


def test_violation_seconds_are_booked_by_vm_after_the_warm_up():
    s = _series(rows=[
        ROWS[0] + (0, 0, (('h1', 'g1', 60.0),)),            # warm-up
        ROWS[1] + (0, 0, ()),
        ROWS[2] + (0, 0, (('h1', 'g2', 9.0), ('h2', 'g3', 3.0))),
        ROWS[3] + (0, 0, (('h2', 'g3', 6.0),))])
    assert s.by_vm == {'g2': 9.0, 'g3': 9.0}
    assert s.first_violation == {'g2': ('h1', 120.0), 'g3': ('h2', 120.0)}
    # A tie goes to the VM id first in order.
    assert metrics.worst_vms(s, 3) == [('g2', 9.0), ('g3', 9.0)]
    summary = metrics.summarize(s)
    assert summary['violating_vms'] == 2
    assert summary['worst_vm'] == 'g2'
    # Its share of the measured steps' 12 violation seconds.
    assert summary['worst_vm_share'] == pytest.approx(9 / 12)
    assert metrics.result_line(summary, 'generated').endswith(
        'violating_vms=2 worst_vm_pct=75.0')


def test_a_run_without_violations_names_no_vm():
    rows = [r[:4] + (0,) + r[5:] for r in ROWS]
    summary = metrics.summarize(_series(rows=rows))
    assert (summary['violating_vms'], summary['worst_vm'],
            summary['worst_vm_share']) == (0, None, None)
    assert metrics.result_line(summary, 'generated').endswith(
        'violating_vms=0 worst_vm_pct=none')


def test_no_measured_step_is_an_error():
    with pytest.raises(ValueError, match='warm-up'):
        metrics.summarize(_series(rows=ROWS[:2]))


def _summary(policy, density, share, per_hour=0.0, demand=25.0):
    return {'policy': policy, 'vms_per_host': density,
            'meets_budget': share <= metrics.QOS_BUDGET,
            'lc_violation_s_per_vm_hour': per_hour, 'hosts': 4,
            'demand_vms': 4 * demand}


def test_compare_takes_the_highest_baseline_ratio_within_budget():
    summaries = [_summary('default@1', 5, 0.0), _summary('default@2', 9,
                                                         0.005, 2.0),
                 _summary('default@4', 15, 0.2),
                 _summary('ufo-sched@2', 9, 0.0),
                 _summary('ufo-sched@4', 12, 0.004, 1.0),
                 _summary('ufo-sched@8', 20, 0.3),
                 _summary('ufo@4', 14, 0.0)]
    c = metrics.compare(summaries)
    assert (c['baseline'], c['ufo']) == ('default@2', 'ufo-sched@4')
    assert c['gain_pct'] == pytest.approx(100 * (12 / 9 - 1))
    assert c['violations_no_more']
    assert metrics.compare_line(c, 'held-out') == (
        'RESULT cluster_gain workload=held-out baseline=default@2 '
        'baseline_vms_per_host=9.00 ufo=ufo-sched@4 ufo_vms_per_host=12.00 '
        'gain_pct=33.3 lc_violations_no_more=yes '
        'demand_vms_per_host=25.00')
    none = metrics.compare(summaries[2:3])
    assert metrics.compare_line(none, 'x') == (
        'RESULT cluster_gain workload=x baseline=none ufo=none gain_pct=none')


def test_compare_takes_ufo_densest_with_no_more_violations():
    # ufo-sched@6 is within the budget but violates more than the
    # baseline; @4 does not and still hosts 30 % more: the operator's
    # choice, and the goal's.
    summaries = [_summary('default@3', 10, 0.0, 0.5),
                 _summary('ufo-sched@4', 13, 0.0, 0.5),
                 _summary('ufo-sched@6', 15, 0.004, 2.0)]
    c = metrics.compare(summaries)
    assert (c['ufo'], c['violations_no_more']) == ('ufo-sched@4', True)
    # With none as good as the baseline, the densest within the budget.
    c = metrics.compare(summaries[:1] + summaries[2:])
    assert (c['ufo'], c['violations_no_more']) == ('ufo-sched@6', False)


def test_smoothed_is_a_trailing_mean():
    assert plots.smoothed([2, 4, 6, 8], 2) == [2, 3, 5, 7]


def test_day_plot_is_written(tmp_path):
    path = tmp_path / 'day.png'
    plots.day(str(path), {'default@2': _series(rows=ROWS),
                          'ufo@2': _series('ufo@2', rows=ROWS)}, 'test')
    assert path.stat().st_size > 10000


def _saved(path, workload, *series):
    path.write_text(json.dumps({
        'workload': workload,
        'series': {s.policy: s.to_dict() for s in series}}))
    return str(path)


def test_saved_runs_are_drawn_again_on_one_figure(tmp_path):
    default = _saved(tmp_path / 'a.json', 'generated',
                     _series('default@2', rows=ROWS))
    ufo = _saved(tmp_path / 'b.json', 'generated',
                 _series('ufo@2', rows=ROWS), _series('ufo@4', rows=ROWS))
    assert plots.main([default, ufo]) == 0
    assert (tmp_path / 'cluster-day.png').stat().st_size > 10000
    out = tmp_path / 'both.png'
    assert plots.redraw([default, ufo], str(out)) == str(out)
    assert out.stat().st_size > 10000


def test_runs_that_do_not_share_a_figure_are_refused(tmp_path, capsys):
    first = _saved(tmp_path / 'a.json', 'generated',
                   _series('ufo@2', rows=ROWS))
    again = _saved(tmp_path / 'b.json', 'generated',
                   _series('ufo@2', rows=ROWS))
    other = _saved(tmp_path / 'c.json', 'held-out',
                   _series('default@2', rows=ROWS))
    with pytest.raises(ValueError, match='policy ufo@2 is in two runs'):
        plots.redraw([first, again])
    with pytest.raises(ValueError, match='generated, held-out'):
        plots.redraw([first, other])
    assert plots.main([first, str(tmp_path / 'missing.json')]) == 1
    assert 'cannot draw' in capsys.readouterr().err
    assert not (tmp_path / 'cluster-day.png').exists()


def test_every_line_of_a_full_figure_has_its_own_look():
    names = ['%s@%s' % (k, r) for k in ('default', 'dyniso', 'ufo',
                                        'ufo-sched', 'ufo-migrate')
             for r in ('1', '2', '4', '8')] + ['custom@3', 'other@3']
    style = plots.styles(names)
    assert len(set(style.values())) == len(names)
    # A kind keeps its colour; its lowest ratio is drawn solid.
    assert {style['ufo@%s' % r][0] for r in '1248'} == {'tab:blue'}
    assert style['default@1'][1] == '-' and style['default@8'][1] == '-.'
    assert style['custom@3'][0] != style['other@3'][0]
    assert plots.styles(['ufo@6', 'ufo@4'])['ufo@4'][1] == '-'
