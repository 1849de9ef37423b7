"""The calibration check's machinery, on synthetic rows.

Whether the model meets the paper is test_calibration_rows.py's job.
"""

import argparse
import json
import math
import types

import pytest

from ufo_sim.calibration import __main__ as cli
from ufo_sim.calibration import report
from ufo_sim.calibration import scenarios
from ufo_sim.calibration import targets
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import registry
from ufo_sim.managers import scenario
from ufo_sim import profiles


def _fixed(**values):
    return lambda ctx: targets.Measured(dict(values))


def _row(row_id, bounds, measure):
    return targets.Target(row_id, 'synthetic', '1 %', bounds, measure)


def test_bound_is_closed_and_checks_each_value():
    b = targets.Bound(15, 50)
    assert b.holds({'a': 15.0, 'b': 50.0})
    assert not b.holds({'a': 14.9, 'b': 30.0})
    assert not b.holds({'a': 30.0, 'b': 50.1})
    assert not b.holds({'a': math.nan})
    assert not b.holds({})


def test_mean_bound_and_several_bounds():
    t = _row('x', (targets.Bound(8, 28, 'mean'), targets.Bound(-5, 43)),
             None)
    assert t.check({'a': 0.0, 'b': 30.0})          # mean 15
    assert not t.check({'a': 0.0, 'b': 10.0})      # mean 5
    assert not t.check({'a': -6.0, 'b': 40.0})     # mean ok, one out
    assert targets.Bound(8, 28, 'mean').text(3) == 'mean in [8, 28]'
    assert targets.Bound(15, 50).text(3) == 'each in [15, 50]'
    assert targets.Bound(9, 29).text(1) == '[9, 29]'


def test_a_bound_of_one_value_checks_that_value_alone():
    t = _row('x', (targets.Bound(18, 38, '2'), targets.Bound(64, 84, '6')),
             None)
    assert t.check({'2': 25.0, '6': 80.0})
    assert not t.check({'2': 25.0, '6': 86.0})
    assert not t.check({'2': 25.0})                # '6' not measured
    assert not t.check({'2': 25.0, '6': math.nan})
    assert targets.Bound(64, 84, '6').text(3) == '6 in [64, 84]'


def test_a_bound_may_check_the_values_named_with_a_suffix():
    t = _row('x', (targets.Bound(20, 30, '* ms'), targets.Bound(0, 3, '* s')),
             None)
    assert t.check({'a ms': 25, 'b ms': 21, 'a s': 0, 'b s': 3})
    assert not t.check({'a ms': 25, 'b ms': 31, 'a s': 0})
    assert not t.check({'a ms': 25, 'a s': 4})
    assert targets.Bound(20, 30, '* ms').text(4) == 'each * ms in [20, 30]'


def test_knee_scaling_is_each_max_load_over_that_on_eight(monkeypatch):
    # Synthetic host: c pCPUs meet QoS up to 10 c % of max load, 8 up to
    # 90 %, so the shares are 10 c / 90.
    def dedicated(profile, pcpus, rps, seconds, seed, host_options=()):
        load = round(rps / profile.max_rps, 6)
        knee = 0.9 if pcpus == 8 else 0.1 * pcpus
        return types.SimpleNamespace(
            p99_us=(0.5 if load <= knee else 2.0) * profile.qos_p99_us)

    monkeypatch.setattr(scenarios, 'dedicated', dedicated)
    got = targets.target('fig4_knee_scaling').measure(targets.Context())
    # The crossing is interpolated half way into the step that misses.
    step = targets.STEP
    expect = {c: 0.1 * c + step / 3 for c in (2, 4, 6)}
    eight = 0.9 + step / 3
    assert got.values == {str(c): pytest.approx(100 * v / eight)
                          for c, v in expect.items()}
    assert targets.target('fig4_knee_scaling').check(
        {'2': 28.0, '4': 51.0, '6': 74.0})


def test_run_averages_seeds_and_passes_the_context():
    seen = []

    def measure(ctx):
        seen.append(ctx)
        return targets.Measured({'v': 10.0 * ctx.seed})

    t = _row('x', (targets.Bound(14, 16),), measure)
    [r] = targets.run([t], seeds=2, processes=3,
                      host_options=[('halt_poll', 1e-3)])
    assert [c.seed for c in seen] == [1, 2]
    assert seen[0].processes == 3
    assert seen[0].host_options == (('halt_poll', 1e-3),)
    assert seen[0].settings().host_options == (('halt_poll', 1e-3),)
    assert r.values == {'v': 15.0} and r.passed
    assert r.cpu_seconds >= 0 and r.wall_seconds >= 0


def test_a_load_is_the_mean_of_three_runs_with_their_own_seeds():
    # One run is 80 ms of real time: the paper's three runs of each load
    # (§3.1), averaged, and no two seeds of a check shared between them.
    seen = []

    def measure(seed):
        seen.append(seed)
        return {1: 100.0, 1001: 400.0, 2001: 100.0}.get(seed, 0.0)

    assert targets.over_runs(targets.Context(seed=1), measure) == 200.0
    assert seen == [1, 1001, 2001]
    runs = [set(targets.Context(seed=s).run_seeds()) for s in (1, 2, 3)]
    assert all(len(r) == targets.RUNS == 3 for r in runs)
    assert not (runs[0] & runs[1] or runs[1] & runs[2] or runs[0] & runs[2])


def test_fig4_row_reads_each_gap_at_the_knee_over_three_runs(monkeypatch):
    # Synthetic curves: SF is 100 per CPU at every load, so the gap of c
    # against c + 2 CPUs is 1 - c / (c + 2); c CPUs meet QoS up to
    # knees[c]. Run 1 alone misses QoS one point before each knee: with
    # one run the knee would come a point early, the mean of three
    # (1.9, 0.5, 0.5 of QoS) meets it.
    knees = {2: 0.25, 4: 0.5, 6: 0.8, 8: 2.0}
    seen = []

    def dedicated(profile, pcpus, rps, seconds, seed, host_options=()):
        seen.append((seed, host_options))
        load = round(rps / profile.max_rps, 2)
        p99 = 0.5 if load <= knees[pcpus] else 2.0
        if seed == 1 and load == round(knees[pcpus] - 0.01, 2):
            p99 = 1.9
        return types.SimpleNamespace(p99_us=p99 * profile.qos_p99_us,
                                     guest_sf=100.0 * pcpus)

    monkeypatch.setattr(scenarios, 'dedicated', dedicated)
    opts = (('smt_slowdown', 1.25),)
    got = targets.target('fig4_sf_gap_at_knee').measure(
        targets.Context(seed=1, host_options=opts))
    assert got.values == {'2->4': pytest.approx(50.0),
                          '4->6': pytest.approx(100 / 3.0),
                          '6->8': pytest.approx(25.0)}
    assert [got.detail[k]['knee'] for k in ('2->4', '4->6', '6->8')] == [
        0.25, 0.5, 0.8]
    assert {s for s, _ in seen} == {1, 1001, 2001}
    assert {o for _, o in seen} == {opts}


def test_the_sf_rule_sweep_needs_a_seed():
    with pytest.raises(ValueError, match='at least one seed'):
        report.sf_rule_vs_knee(profiles.MEMCACHED, 4, 6, [])


def test_max_load_sweep_stops_at_the_first_mean_above_qos():
    p = profiles.MEMCACHED
    ctx = targets.Context(seed=1)
    # Run 1001 alone is above QoS at 30 % of max load; the mean is not.

    def p99(rps):
        load = round(rps / p.max_rps, 6)
        return targets.over_runs(ctx, lambda seed: (
            1.7 * p.qos_p99_us if seed == 1001 and load == 0.3 else
            (0.5 if load <= 0.6 else 2.0) * p.qos_p99_us))

    # The mean crosses QoS a third of the way from 60 % to 62.5 %.
    assert targets.max_load(p, p99) == pytest.approx(0.6 + 0.025 / 3)


def test_table_has_one_aligned_line_per_row():
    rows = [_row('short', (targets.Bound(0, 1),), _fixed(pct=0.5)),
            _row('a_longer_id', (targets.Bound(8, 28, 'mean'),
                                 targets.Bound(-5, 43)),
                 _fixed(memcached=-12.0, nginx=3.0))]
    lines = targets.format_table(targets.run(rows))
    assert len(lines) == 3
    header, short, other = lines
    assert header.split()[:3] == ['row', 'model', 'paper']
    assert short.split() == ['short', '0.5', '1', '%', '[0,', '1]',
                             'PASS', short.split()[-1]]
    assert ('memcached -12.0  nginx 3.0  mean -4.5' in other and
            'mean in [8, 28], each in [-5, 43]' in other and
            'FAIL' in other)
    # aligned: the paper column starts at the same place
    assert short.index('1 %') == other.index('1 %')


def test_a_very_long_model_cell_only_pushes_its_own_line():
    many = {'v%d' % i: 1.0 for i in range(20)}
    rows = [_row('a', (targets.Bound(0, 2),), _fixed(x=1.0)),
            _row('b', (targets.Bound(0, 2),), _fixed(**many))]
    header, a, b = targets.format_table(targets.run(rows))
    assert a.index('PASS') == header.index('result')
    assert b.index('PASS') > header.index('result')


@pytest.fixture
def synthetic(monkeypatch):
    rows = (_row('good', (targets.Bound(0, 1),), _fixed(pct=0.5)),
            _row('bad', (targets.Bound(0, 1),), _fixed(pct=2.0)))
    monkeypatch.setattr(targets, 'TARGETS', rows)
    return rows


def test_check_exits_1_on_a_failing_row(synthetic, tmp_path, capsys):
    assert cli.main(['check', '--out', str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert '1/2 rows pass' in out
    data = json.loads((tmp_path / 'calibration-check.json').read_text())
    assert [r['id'] for r in data['rows']] == ['good', 'bad']
    assert [r['pass'] for r in data['rows']] == [True, False]
    assert data['passed'] is False
    assert data['rows'][1]['values'] == {'pct': 2.0}
    assert data['rows'][1]['accept'] == [
        {'low': 0, 'high': 1, 'of': 'each'}]


def test_only_runs_the_rows_named(synthetic, tmp_path, capsys):
    assert cli.main(['check', '--only', 'good', '--out',
                     str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert 'good' in out and 'bad' not in out
    with pytest.raises(SystemExit) as exc:
        cli.main(['check', '--only', 'good,nope'])
    assert exc.value.code == 2
    assert 'unknown row nope' in capsys.readouterr().err


def test_json_has_no_nan(synthetic, monkeypatch, tmp_path):
    monkeypatch.setattr(targets, 'TARGETS', (
        _row('undefined', (targets.Bound(0, 1),), _fixed(x=math.nan)),))
    assert cli.main(['check', '--out', str(tmp_path)]) == 1
    text = (tmp_path / 'calibration-check.json').read_text()
    assert 'NaN' not in text
    assert json.loads(text)['rows'][0]['values'] == {'x': None}


def _check_with(monkeypatch, tmp_path, *argv):
    """Run check with ``argv`` on one row: (its Context, the JSON)."""
    seen = []

    def measure(ctx):
        seen.append(ctx)
        return targets.Measured({'x': 0.0})

    monkeypatch.setattr(targets, 'TARGETS',
                        (_row('opt', (targets.Bound(0, 1),), measure),))
    assert cli.main(['check', '--out', str(tmp_path)] + list(argv)) == 0
    ctx, = seen
    return ctx, json.loads(
        (tmp_path / 'calibration-check.json').read_text())


def test_host_option_reaches_the_rows(monkeypatch, tmp_path):
    ctx, data = _check_with(monkeypatch, tmp_path,
                            '--host-option', 'smt_slowdown=1.2',
                            '--host-option', 'max_outstanding=100')
    assert ctx.host_options == (('smt_slowdown', 1.2),
                                ('max_outstanding', 100))
    assert data['host_options'] == {'smt_slowdown': 1.2,
                                    'max_outstanding': 100}


@pytest.mark.parametrize('flag,text,why', [
    ('--host-option', 'nosuch=1', 'NAME one of'),
    ('--host-option', 'cores=4', 'NAME one of'),    # scenarios set shape
    ('--host-option', 'halt_poll', 'NAME one of'),
    ('--host-option', 'halt_poll=fast', 'not JSON'),
    ('--host-option', 'max_outstanding=1.5', 'takes an integer'),
    ('--host-option', 'smt_slowdown=true', 'takes a number'),
    ('--host-option', 'smt_slowdown=0.5', 'smt_slowdown must be >= 1'),
    ('--profile-option', 'nginx.cache_footprint', 'PROFILE.FIELD=VALUE'),
    ('--profile-option', 'be.threads=2', 'PROFILE.FIELD=VALUE'),
    ('--profile-option', 'nginx.max_rps=10', 'PROFILE.FIELD=VALUE'),
    ('--profile-option', 'nginx.cache_footprint=-0.1', 'from 0'),
    ('--profile-option', 'nginx.lock_share=1', 'below 1'),
    ('--profile-option', 'nginx.service=0', 'above 0'),
    ('--profile-option', 'mysql.rounds=2.5', 'integer from 1'),
    ('--profile-option', 'mysql.threads=2000', 'integer from 1 to 1024'),
    ('--profile-option', 'mysql.irq=true', 'takes a number'),
])
def test_bad_options_are_usage_errors(flag, text, why, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(['check', flag, text])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert why in err
    if why == 'NAME one of':
        for field in targets.host_option_fields():
            assert field in err


def test_host_option_fields_are_hostspec_minus_the_shape():
    fields = targets.host_option_fields()
    assert 'smt_slowdown' in fields and 'halt_poll' in fields
    assert 'cores' not in fields and 'smt' not in fields
    assert targets.parse_host_option('halt_poll=2e-3') == ('halt_poll',
                                                           2e-3)


def test_every_scenario_host_gets_the_options(monkeypatch):
    specs = []

    class Built(Exception):
        pass

    def fake_host(spec, seed):
        specs.append(spec)
        raise Built()

    monkeypatch.setattr(scenarios, 'SimHost', fake_host)
    opts = (('smt_slowdown', 1.25),)
    mc = profiles.MEMCACHED
    for run in (lambda: scenarios.dedicated(mc, 8, 1.0, host_options=opts),
                lambda: scenarios.max_load(mc, host_options=opts),
                lambda: scenarios.four_vms(mc, 1.0, 'default',
                                           host_options=opts),
                lambda: scenarios.emulator_placement(
                    mc, 1.0, True, host_options=opts),
                lambda: scenarios.be_modes(host_options=opts)):
        with pytest.raises(Built):
            run()
    assert [s.smt_slowdown for s in specs] == [1.25] * 5
    assert [s.cpus for s in specs] == [16, 16, 32, 16, 32]
    with pytest.raises(ValueError):
        scenarios.host_spec(8, 2, (('cores', 4),))


def test_manager_scenes_get_the_options():
    cell = cell_mod.Cell((cell_mod.VmLoad('memcached', 0.1),))
    settings = cell_mod.Settings(host_options=(('smt_slowdown', 1.25),))
    scene = scenario.build(cell, settings, seed=1)
    assert scene.host.spec.smt_slowdown == 1.25
    assert scene.host.spec.cpus == 16


def test_profile_option_reaches_the_rows_and_the_json(monkeypatch,
                                                      tmp_path):
    ctx, data = _check_with(monkeypatch, tmp_path,
                            '--profile-option', 'nginx.lock_share=0',
                            '--profile-option',
                            'memcached.cache_footprint=0.5')
    assert ctx.profile_options == (('memcached.cache_footprint', 0.5),
                                   ('nginx.lock_share', 0.0))
    nginx = [p for p in ctx.lc_profiles() if p.name == 'nginx'][0]
    assert nginx.lock_share == 0.0
    assert ctx.profile('memcached').cache_footprint == 0.5
    assert ctx.profile('memcached').max_rps == profiles.MEMCACHED.max_rps
    assert ctx.settings().profile_options == ctx.profile_options
    assert data['profile_options'] == {'memcached.cache_footprint': 0.5,
                                       'nginx.lock_share': 0.0}


def test_manager_scenes_run_the_profile_options():
    cell = cell_mod.Cell((cell_mod.VmLoad('nginx', 0.5),
                          cell_mod.VmLoad('mysql', 0.5)))
    settings = cell_mod.Settings(
        profile_options=(('nginx.cache_footprint', 0.8),))
    scene = scenario.build(cell, settings, seed=1)
    assert scene.profiles[0].cache_footprint == 0.8
    assert scene.profiles[1] == profiles.MYSQL
    # The load stays a fraction of the profile's max load.
    assert scene.rps[0] == 0.5 * profiles.NGINX.max_rps
    assert 'profile_option.nginx.cache_footprint=0.8' in \
        settings.describe()


def test_a_profile_option_changes_what_the_engine_runs():
    # A smaller lock: less time spinning, less guest busy per request.
    def busy(settings):
        cell = cell_mod.Cell((cell_mod.VmLoad('mysql', 0.5),))
        scene = scenario.build(cell, settings, seed=3)
        vm = scene.vms[0]
        scene.host.pin_vcpus(vm, range(4))
        scene.host.pin_emulator(vm, [8, 9])
        scene.host.set_online(vm, 4)
        scene.host.advance(4.0)
        c = scene.host.counters(scene.vms[0])
        return c.guest_busy_ns / c.requests_done
    plain = busy(cell_mod.Settings())
    hot = busy(cell_mod.Settings(
        profile_options=(('mysql.lock_share', 0.5),)))
    assert hot > 1.2 * plain


def test_max_load_is_where_the_p99_crosses_qos():
    mc = profiles.MEMCACHED
    knee = 0.4 * mc.max_rps
    tried = []

    def p99(rps):
        tried.append(rps)
        return mc.qos_p99_us * (0.5 if rps <= knee + 1e-6 else 2)

    # On the line from (40 %, QoS / 2) to (42.5 %, 2 QoS).
    assert targets.max_load(mc, p99) == pytest.approx(0.4 + 0.025 / 3)
    assert len(tried) == 17                 # stops at the first miss
    assert targets.max_load(mc, lambda rps: math.inf) == 0.0


@pytest.mark.parametrize('points, cross', [
    ([(0.1, 50), (0.2, 80), (0.3, 120)], 0.25),
    ([(0.1, 50), (0.2, math.inf)], 0.1),    # a run that never drained
    ([(0.1, 150), (0.2, 50)], 0.0),         # the first load misses
    ([(0.1, 50), (0.2, 100)], 0.2),         # at QoS meets it
    ([], 0.0),
])
def test_qos_cross_reads_the_curve_between_met_and_missed(points, cross):
    assert report.qos_cross(points, 100) == pytest.approx(cross)


def test_qos_cross_reads_no_point_past_the_first_miss():
    read = []

    def points():
        for load, p99 in ((0.1, 50), (0.2, 150), (0.3, 50)):
            read.append(load)
            yield load, p99

    assert report.qos_cross(points(), 100) == pytest.approx(0.15)
    assert read == [0.1, 0.2]


# (VM1 load, VM2 load) -> (CPUs, QoS met); asymmetric on purpose: the
# mirror cell must be copied, not simulated.
FAKE = {(0.1, 0.1): (4, True), (0.1, 0.2): (6, True), (0.1, 0.3): (8, True),
        (0.2, 0.2): (10, False), (0.2, 0.3): (20, True)}


def _fake_manager(cell, settings):
    a, b = (v.load for v in cell.vms)
    if (a, b) not in FAKE:
        raise RuntimeError('boom')
    cpus, met = FAKE[a, b]
    return cell_mod.CellResult('fake', cell.key, cpus, met, (0, 0))


def test_fig12_grid_mirrors_and_keeps_errors(monkeypatch):
    monkeypatch.setitem(registry.MANAGERS, 'fake', _fake_manager)
    found = targets.fig12_grid('fake', targets.Context(processes=1),
                               loads=(0.1, 0.2, 0.3))
    assert found['cpus'] == [[4, 6, 8],
                             [6, None, None],     # QoS missed; over budget
                             [8, None, None]]     # (0.3, 0.3) raised
    assert len(found['errors']) == 1 and 'boom' in found['errors'][0]


def test_fig12_heatmap_is_drawn(tmp_path):
    from ufo_sim.calibration import figures
    loads = [0.1, 0.2]
    grids = {m: {'loads': loads, 'budget': 16,
                 'cpus': [[4, None], [None, None]]}
             for m in ('default', 'dyniso')}
    path = figures.fig12(grids, targets.PAPER_FIG12_PCT, str(tmp_path))
    assert path.endswith('fig12.png')
    assert (tmp_path / 'fig12.png').stat().st_size > 1000


def test_every_row_is_named_once_and_fig12_rows_exist():
    ids = [t.id for t in targets.TARGETS]
    assert len(ids) == len(set(ids)) == 18
    for row in tuple(targets.FIG12_ROWS.values()) + targets.SLOW_ROWS:
        assert targets.target(row).bounds


def test_a_flag_host_option_takes_true_or_false():
    # The ablation's off switch for the guest locks, from the command line.
    assert targets.parse_host_option('guest_locks=false') == (
        'guest_locks', False)
    with pytest.raises(argparse.ArgumentTypeError, match='true or false'):
        targets.parse_host_option('guest_locks=0')


def test_the_figures_summary_prints_a_rule_that_never_fires():
    # MySQL's SF differs too little on neighbouring counts for the 30 %
    # rule to fire anywhere in a sweep (Appendix A.3); the summary of
    # ``figures`` printed it by multiplying None.
    curves = {6: dict(loads=[0.7, 0.8], guest_sf=[100.0, 98.0], knee=0.8),
              8: dict(loads=[0.7, 0.8], guest_sf=[100.0, 100.0],
                      knee=None)}
    gap, = report.sf_gaps(curves)
    assert gap['first_load'] is None
    assert cli._gap_line('mysql', gap) == (
        'mysql     sf  6->8 pCPUs: gap > 30% from load -, knee 80%, gap at '
        'knee 2%')


def test_fig15_row_reads_the_decomposition_gains(monkeypatch):
    def run(settings, apps, counts, vcpus, processes):
        assert vcpus == 16 and tuple(counts) == (4, 8, 12, 16)
        return {'gain_over_default_pct': {'vcpu': 21.0, 'emulator': -1.0,
                                          'combined': 66.0},
                'max_load': {}}
    monkeypatch.setattr(targets.decompose, 'run', run)
    row = targets.target('fig15_decomposition')
    values = row.measure(targets.Context()).values
    assert values == {'UFO-vCPU': 21.0, 'UFO-combined': 66.0}
    assert row.check(values)
    assert not row.check(dict(values, **{'UFO-combined': 20.4}))


def test_fig14_row_is_the_longest_recovery_under_the_papers_run(
        monkeypatch):
    runs = []

    def simulate(manager, settings, scale):
        runs.append((manager, settings))
        back = {'ufo': (3, 2, 1, 2), 'flavor': (0, 0, 0, 0)}[manager]
        missed = {'ufo': (3, 2, 1, 14), 'flavor': (0, 0, 0, 12)}[manager]
        return {'vms': {'nginx': {
            'violation_seconds': sum(missed),
            'load_steps': [{'violation_s': m, 'recovered_after_s': b}
                           for m, b in zip(missed, back)]}}}
    monkeypatch.setattr(targets.dynamic, '_simulate', simulate)
    measured = targets.fig14_nginx_step(targets.Context(seed=4))
    assert measured.values == {'nginx': 3.0}
    assert measured.detail['violation_s'] == [3, 2, 1, 14]
    assert measured.detail['on_the_flavor_s'] == [0, 0, 0, 12]
    assert [m for m, _ in runs] == ['ufo', 'flavor']
    for _, settings in runs:
        rules = dict(settings.ufo_config)
        assert rules['confirm_samples'] == 1
        assert rules['emulator_util_high'] == 0.70
        # "keep the emulator pool large enough" (§6.2): 8 CPUs, fixed.
        assert rules['emulator_min_cores'] * settings.smt == 8
        assert settings.seed == 4
        assert settings.budget == 3 * 8 + 8
