"""Held-out knobs: host size, VM sizes, host options, mixes of N VMs."""

import dataclasses
import json
import math
import os

import pytest

from ufo_sim import cmd
from ufo_sim.commands import common
from ufo_sim import engine
from ufo_sim.experiments import grid as grid_mod
from ufo_sim.experiments import report
from ufo_sim.experiments import summary
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import registry
from ufo_sim.managers import scenario

TINY = cell_mod.Settings(warmup=1.0, measure=4.0, converge=2, judge=2)
THREE = cell_mod.Cell((cell_mod.VmLoad('memcached', 0.2),
                       cell_mod.VmLoad('nginx', 0.2),
                       cell_mod.VmLoad('mysql', 0.2)))


def _parse(*argv):
    return cmd.parser().parse_args(['grid'] + list(argv))


def _refused(capsys, *argv):
    with pytest.raises(SystemExit) as exc:
        cmd.main(['grid', '--no-plots'] + list(argv))
    assert exc.value.code == 2
    return capsys.readouterr().err


# -- arguments -------------------------------------------------------------

def test_host_knobs_reach_the_settings():
    args = _parse('--cores', '12', '--smt', 'off', '--vcpus', '4',
                  '--vcpus', 'memcached=16,nginx=2', '--host-option',
                  'smt_slowdown=1.3', '--host-option', 'max_outstanding=100',
                  '--seed', '9')
    s = common.settings(args)
    assert (s.cores, s.smt, s.budget, s.seed) == (12, 1, 12, 9)
    assert s.vcpus_of('memcached', 8) == 16
    assert s.vcpus_of('nginx', 8) == 2
    assert s.vcpus_of('mysql', 8) == 4
    assert dict(s.host_options) == {'smt_slowdown': 1.3,
                                    'max_outstanding': 100}
    # A float field takes an integer as a float.
    s = common.settings(_parse('--host-option', 'smt_slowdown=2'))
    assert s.host_options == (('smt_slowdown', 2.0),)
    assert isinstance(s.host_options[0][1], float)
    # Defaults: the paper's host, the profile's flavor.
    s = common.settings(_parse())
    assert (s.cores, s.smt, s.vcpus, s.host_options) == (8, 2, (), ())


def test_profile_options_reach_the_settings(capsys):
    s = common.settings(_parse('--profile-option', 'nginx.lock_share=0',
                               '--profile-option', 'mysql.rounds=6'))
    assert s.profile_options == (('mysql.rounds', 6),
                                 ('nginx.lock_share', 0.0))
    assert common.settings(_parse()).profile_options == ()
    err = _refused(capsys, '--profile-option', 'nginx.qos_p99_us=1')
    assert 'PROFILE.FIELD=VALUE' in err and 'cache_footprint' in err


def test_a_grid_saved_before_a_setting_existed_is_the_same_grid():
    settings = cell_mod.Settings(seed=3)
    saved = dataclasses.asdict(settings)
    del saved['profile_options']
    assert grid_mod.identity(settings, [0.5], ['nginx+mysql']) == \
        grid_mod.identity(saved, [0.5], ['nginx+mysql'])
    other = dataclasses.replace(
        settings, profile_options=(('nginx.lock_share', 0.0),))
    assert grid_mod.identity(other, [0.5], ['nginx+mysql']) != \
        grid_mod.identity(saved, [0.5], ['nginx+mysql'])


def test_host_size_options_set_the_budget():
    s = common.settings(_parse('--host-option', 'cores=6',
                               '--host-option', 'smt=1'))
    assert (s.cores, s.smt, s.host_options) == (6, 1, ())
    s = common.settings(_parse('--smt', 'on', '--host-option', 'smt=2'))
    assert s.smt == 2
    with pytest.raises(common.UsageError):
        common.settings(_parse('--cores', '4', '--host-option', 'cores=6'))


@pytest.mark.parametrize('argv, says', [
    (['--host-option', 'nope=1'], 'smt_slowdown'),
    (['--host-option', 'smt_slowdown'], 'NAME=VALUE'),
    (['--host-option', 'smt_slowdown=fast'], 'not JSON'),
    (['--host-option', 'smt_slowdown="1.3"'], 'a number'),
    (['--host-option', 'max_outstanding=2.5'], 'an integer'),
    (['--smt', 'maybe'], 'invalid choice'),
    (['--vcpus', 'redis=4'], 'memcached'),
    (['--vcpus', '0'], 'N >= 1'),
    (['--pairs', 'memcached+nginx+mysql'], '2 profiles'),
    (['--mix', 'memcached+redis'], 'nginx'),
    (['--apps', 'memcached,redis'], 'not one of'),
    (['--mix', 'memcached+nginx', '--apps', 'mysql'], 'not allowed'),
])
def test_bad_arguments_are_refused(capsys, argv, says):
    assert says in _refused(capsys, *argv)


def test_an_unknown_host_option_lists_every_field(capsys):
    err = _refused(capsys, '--host-option', 'nope=1')
    for field in dataclasses.fields(engine.HostSpec):
        assert field.name in err


@pytest.mark.parametrize('argv', [
    ['--host-option', 'smt_slowdown=0.5'],     # HostSpec refuses < 1
    ['--cores', '40'],                          # 80 logical CPUs
    ['--host-option', 'numa_nodes=3'],          # 8 cores over 3 nodes
    ['--vcpus', 'nginx=80'],                    # the engine's limit
])
def test_a_host_that_cannot_be_built_stops_before_simulating(
        capsys, monkeypatch, argv):
    def no_run(*args, **kwargs):
        raise AssertionError('simulated anyway')
    monkeypatch.setattr(grid_mod, 'run', no_run)
    err = _refused(capsys, *argv)
    assert 'no host can be built' in err
    assert 'ufo-sim grid: error' in err


def test_mixes_and_pairs():
    args = _parse('--pairs', 'memcached+nginx,mysql+mysql', '--pairs',
                  'nginx+nginx')
    assert args.pairs == [[('memcached', 'nginx'), ('mysql', 'mysql')],
                          [('nginx', 'nginx')]]
    args = _parse('--mix', 'memcached+nginx+mysql')
    assert args.mix == [[('memcached', 'nginx', 'mysql')]]


# -- Settings to host -------------------------------------------------------

def test_one_builder_makes_every_host():
    s = cell_mod.Settings(cores=6, smt=1, host_options=(
        ('smt_slowdown', 1.2), ('halt_poll', 0.0)))
    spec = scenario.host_spec(s)
    assert (spec.cores, spec.smt, spec.cpus) == (6, 1, 6)
    assert (spec.smt_slowdown, spec.halt_poll) == (1.2, 0.0)
    # Every other field keeps HostSpec's default.
    default = engine.HostSpec()
    for f in dataclasses.fields(spec):
        if f.name not in ('cores', 'smt', 'smt_slowdown', 'halt_poll'):
            assert getattr(spec, f.name) == getattr(default, f.name)
    assert scenario.host_spec(s, cores=9).cores == 9
    scene = scenario.build(THREE, s, 1)
    assert scene.host.spec == spec
    assert scene.cores == [(c,) for c in range(6)]
    with pytest.raises(ValueError):
        scenario.host_spec(dataclasses.replace(
            s, host_options=(('smt_slowdown', 0.5),)))
    with pytest.raises(ValueError):
        cell_mod.Settings(host_options=(('cores', 4),))


def test_vcpus_follow_the_settings_and_the_load_stays_per_profile():
    s = cell_mod.Settings(vcpus=(('*', 4), ('mysql', 12)))
    scene = scenario.build(THREE, s, 1)
    assert scene.vcpus == [4, 4, 12]
    assert scene.rps == [0.2 * scene.profiles[i].max_rps for i in range(3)]
    assert scenario.flavor_cores(THREE, s) == [2, 2, 6]
    assert scenario.flavor_cores(THREE, dataclasses.replace(s, smt=1)) == \
        [4, 4, 12]


def test_a_larger_host_is_rounded_to_what_the_spec_accepts():
    s = cell_mod.Settings(host_options=(('numa_nodes', 2),))
    assert scenario.fit_cores(s, 9) == 10
    # Past 64 logical CPUs: the smallest size the trial needs.
    assert scenario.fit_cores(cell_mod.Settings(), 40, 12) == 12
    with pytest.raises(ValueError):
        scenario.fit_cores(cell_mod.Settings(), 40)


# -- judged windows ---------------------------------------------------------

def test_held_stats_on_a_series():
    ticks = [(1.0, True), (1.0, False), (1.0, True), (1.0, False)]
    stats = scenario.held_stats([8, 12, 10, 6], ticks)
    assert stats == {'cpus_max': 12, 'cpus_mean': 9.0,
                     'qos_violation_s': 2.0}
    # A static allocation: one count; a partial last interval weighs
    # its share of a second.
    stats = scenario.held_stats(10, [(1.0, True), (0.2, False)])
    assert stats == {'cpus_max': 10, 'cpus_mean': 10.0,
                     'qos_violation_s': 0.2}
    stats = scenario.held_stats([4, 10], [(1.0, True), (0.5, True)])
    assert stats['cpus_mean'] == pytest.approx((4 + 5) / 1.5)
    assert scenario.held_stats(None, ()) == {
        'cpus_max': None, 'cpus_mean': None, 'qos_violation_s': None}


def test_measuring_in_intervals_changes_nothing():
    s = cell_mod.Settings()
    one = scenario.build(THREE, s, 3)
    scenario.apply_isolated(one, [1, 1, 1], 1)
    steps = scenario.build(THREE, s, 3)
    scenario.apply_isolated(steps, [1, 1, 1], 1)
    a = scenario.measure(one, 1.0, 12.0)
    b = scenario.measure(steps, 1.0, 12.0, tick=5.0)
    assert a.p99_us == b.p99_us and a.ok == b.ok
    assert a.ticks == ()
    assert [t for t, _ in b.ticks] == [1.0, 1.0, 0.4]


@pytest.mark.parametrize('smt', [1, 2])
def test_every_manager_takes_three_vms(smt):
    s = dataclasses.replace(TINY, smt=smt, cores=12 if smt == 1 else 8)
    for name in registry.MANAGERS:
        r = registry.evaluate(name, THREE, s)
        assert len(r.p99_us) == 3, name
        assert r.cpus_max is not None, name
        assert r.cpus_mean <= r.cpus_max, name
        if name in ('ufo', 'ufo-host-only', 'dyniso'):
            assert r.qos_violation_s in (0.0, 1.0, 2.0), name
            assert len(r.detail['vm_cores']) == 3
            assert r.cpus == r.cpus_max <= s.budget
        else:
            # The answer is judged over ``judge`` intervals; a Default
            # that finds none shows its last trial, 4/50 of an interval.
            assert r.qos_violation_s in (0.0, 0.08, 1.0, 2.0), name
            assert r.cpus_mean == r.cpus_max
        if r.cpus is not None:
            assert r.cpus % smt == 0
    static = registry.evaluate('static', THREE, s)
    assert static.cpus == (3 * math.ceil(8 / smt) + 1) * smt


# -- grid -------------------------------------------------------------------

def test_cells_of_a_mix_and_their_mirrors():
    cells = grid_mod.cells_of(('mysql', 'memcached', 'mysql'), (0.1, 0.5))
    assert len(cells) == 8
    simulated = {grid_mod.canonical(c)[0] for c in cells}
    # The two MySQL VMs are interchangeable: (a, m, b) is (b, m, a).
    assert len(simulated) == 6
    cell = cells[-2]         # mysql@50+memcached@50+mysql@10
    source, order = grid_mod.canonical(cell)
    assert source.key == 'mysql@10+memcached@50+mysql@50'
    assert [source.vms[j] for j in order] == list(cell.vms)
    result = {'manager': 'ufo', 'cell': source.key, 'p99_us': [1, 2, 3],
              'detail': {'vm_cores': [4, 5, 6], 'overloaded': False}}
    out = grid_mod._mirrored(result, cell, order)
    assert out['p99_us'] == [3, 2, 1]
    assert out['detail']['vm_cores'] == [6, 5, 4]
    assert out['detail']['mirror_of'] == source.key


def _r(manager, cell, cpus, ok, mean=None, top=None, viol=0.0):
    return {'manager': manager, 'cell': cell, 'cpus': cpus, 'qos_met': ok,
            'p99_us': [1.0], 'detail': {},
            'cpus_max': top if top is not None else cpus,
            'cpus_mean': mean if mean is not None else cpus,
            'qos_violation_s': viol}


def test_summary_keys_on_synthetic_results():
    results = [
        _r('ufo', 'c1', 4, True, mean=3.0), _r('dyniso', 'c1', 8, True),
        _r('oracle', 'c1', 4, True),
        _r('ufo', 'c2', 8, True, viol=1.0), _r('dyniso', 'c2', 10, True),
        _r('oracle', 'c2', None, False, mean=None, top=None),
        _r('ufo', 'c3', 12, True, top=14), _r('dyniso', 'c3', 16, False),
        _r('oracle', 'c3', 6, True),
        _r('default', 'c1', None, False, mean=16, top=16, viol=2.0),
    ]
    results[5]['cpus_mean'] = results[5]['cpus_max'] = None
    results[5]['qos_violation_s'] = None
    f = summary.figures(results, 16)
    # UFO and DynIso both meet c1, c2: (8-4)/8 and (10-8)/10.
    assert f['ufo_vs_dyniso_core_saving_avg'] == pytest.approx(35.0)
    # UFO and the Oracle both meet c1, c3.
    assert f['ufo_over_oracle_ratio'] == pytest.approx((1.0 + 2.0) / 2)
    assert f['ufo_over_oracle_cores'] == pytest.approx((0 + 6) / 2)
    # All three meet only c1: UFO's and the Oracle's saving there.
    assert f['cells_compared_all_three'] == 1
    assert f['ufo_vs_dyniso_core_saving_avg_common'] == 50.0
    assert f['oracle_vs_dyniso_core_saving_avg'] == 50.0
    assert f['ufo_cpus_mean_avg'] == pytest.approx((3 + 8 + 12) / 3)
    assert f['ufo_cpus_max_max'] == 14
    assert f['ufo_qos_violation_s_avg'] == pytest.approx(1 / 3)
    # Only judged cells count: the Oracle judged nothing in c2.
    assert f['oracle_cpus_mean_avg'] == 5.0
    assert f['default_cpus_max_max'] == 16
    assert 'static_cpus_mean_avg' not in f
    line = summary.result_line(f)
    words = dict(w.split('=') for w in line.split()[1:])
    assert list(words)[:len(summary.RESULT_KEYS)] == list(
        summary.RESULT_KEYS)
    assert list(words)[len(summary.RESULT_KEYS):] == [
        'default_cpus_mean_avg', 'default_cpus_max_max',
        'dyniso_cpus_mean_avg', 'dyniso_cpus_max_max', 'ufo_cpus_mean_avg',
        'ufo_cpus_max_max', 'oracle_cpus_mean_avg', 'oracle_cpus_max_max']
    assert words['ufo_over_oracle_ratio'] == '1.50'


def test_a_three_vm_grid_echoes_its_conditions(tmp_path, capsys):
    out = str(tmp_path)
    assert cmd.main([
        'grid', '--out', out, '--no-plots', '--processes', '1',
        '--mix', 'memcached+nginx+mysql', '--loads', '0.1',
        '--managers', 'default,static', '--cores', '12', '--smt', 'off',
        '--vcpus', 'mysql=4', '--host-option', 'smt_slowdown=1.3',
        '--warmup', '1', '--measure', '4', '--seed', '3']) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    with open(os.path.join(out, 'grid.json')) as f:
        data = json.load(f)
    assert data['settings']['host_options'] == [['smt_slowdown', 1.3]]
    assert data['settings']['vcpus'] == [['mysql', 4]]
    assert (data['host']['cores'], data['host']['smt'],
            data['host']['smt_slowdown']) == (12, 1, 1.3)
    assert data['mixes'] == ['memcached+nginx+mysql']
    assert lines[-2] == data['conditions']
    for word in ('mixes=memcached+nginx+mysql', 'loads=0.1', 'cores=12',
                 'smt=1', 'budget_cpus=12', 'seed=3', 'vcpus.mysql=4',
                 'host_option.smt_slowdown=1.3'):
        assert word in lines[-2].split()
    assert lines[-1] == data['result_line']
    static = [r for r in data['results'] if r['manager'] == 'static'][0]
    assert static['cpus'] == 8 + 8 + 4 + 1
    assert static['cpus_max'] == static['cpus_mean'] == static['cpus']
    # A saved grid gives the same conditions again.
    assert report.conditions_line(json.loads(json.dumps(data))) == \
        data['conditions']


def test_dynamic_takes_the_same_knobs(tmp_path, capsys):
    out = str(tmp_path)
    assert cmd.main([
        'dynamic', '--scale', '0.02', '--out', out, '--no-plots',
        '--managers', 'dyniso,ufo', '--cores', '6', '--smt', 'off',
        '--vcpus', '4', '--host-option', 'smt_slowdown=1.2',
        '--load-scale', '0.5', '--seed', '2']) == 0
    text = capsys.readouterr().out
    with open(os.path.join(out, 'dynamic.json')) as f:
        dyn = json.load(f)
    assert dyn['errors'] == {}
    assert dyn['load_scale'] == 0.5
    assert (dyn['settings']['cores'], dyn['settings']['smt']) == (6, 1)
    assert dyn['host']['smt_slowdown'] == 1.2
    assert text.splitlines()[0] == dyn['conditions']
    assert 'load_scale=0.5' in dyn['conditions']
    ufo_run = dyn['results']['ufo']
    assert max(ufo_run['trace']['held_cpus']) <= 6
    # Nginx starts at 20 % of its max load, halved.
    assert ufo_run['trace']['load'][0][0] == pytest.approx(0.1)
