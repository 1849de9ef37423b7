"""Sets of dynamic runs, summed and paired (ufo-sim dynamic-set)."""

import json
import os

import pytest

from ufo_sim import cmd
from ufo_sim.experiments import dynamic_set


def _rec(seed, nginx_steps, mysql_steps=(0, 1, 1), memcached_steps=(5, 15),
         cores=8, held=14.0):
    def vm(steps, moved=0):
        return {'violation_seconds': sum(steps) + 2,
                'step_violation_s': list(steps), 'bursts_moved_cores': moved,
                'core_changes': 3}
    return {'seed': seed, 'load_scale': 1.0, 'cores': cores,
            'mean_held_cpus': held,
            'vms': {'nginx': vm(nginx_steps), 'mysql': vm(mysql_steps),
                    'memcached': vm(memcached_steps)}}


def _set(*records):
    return {'runs': list(records)}


def test_sign_test_is_the_two_sided_binomial_tail():
    assert dynamic_set.sign_test(0, 0) == 1.0
    # 24 of 24 one way: 2 / 2^24.
    assert dynamic_set.sign_test(24, 0) == pytest.approx(2 / 2 ** 24)
    # 6 against 11: 2 * P(X <= 6) for X ~ B(17, 1/2) = 0.332.
    assert dynamic_set.sign_test(6, 11) == pytest.approx(0.3323, abs=1e-4)
    assert dynamic_set.sign_test(11, 6) == dynamic_set.sign_test(6, 11)
    assert dynamic_set.sign_test(5, 5) == 1.0


def test_summary_sums_steps_and_counts_those_over_the_target():
    s = dynamic_set.summarize([_rec(1, (4, 3, 0, 30)), _rec(2, (3, 3, 9, 30))])
    assert s['runs'] == 2
    assert s['apps']['nginx']['step_violation_s'] == 82
    # 4, 30; 9, 30 over 3 s; Memcached's 5 and 15 twice.
    assert s['apps']['nginx']['steps_over_target'] == 4
    assert s['steps_over_target'] == 8
    assert s['step_violation_s'] == 82 + 2 * 2 + 2 * 20
    assert s['mean_held_cpus_sum'] == 28.0


def test_compare_pairs_runs_by_condition_not_by_order():
    base = _set(_rec(1, (4, 3, 0, 30)), _rec(2, (4, 3, 2, 30)),
                _rec(3, (4, 3, 1, 30)))
    new = _set(_rec(3, (3, 3, 9, 30)), _rec(1, (3, 3, 0, 31)),
               _rec(2, (3, 3, 0, 30)))
    cmp = dynamic_set.compare(base, new)
    first, _, third, fourth = [st for st in cmp['steps']
                               if st['app'] == 'nginx']
    assert (first['better'], first['worse'], first['base_s'],
            first['new_s']) == (3, 0, 12, 9)
    assert (third['better'], third['worse']) == (1, 1)
    assert (fourth['better'], fourth['worse']) == (0, 1)
    # Nginx 37 + 39 + 38 and 45 + 37 + 36; MySQL 2 and Memcached 20 a run.
    assert cmp['base']['step_violation_s'] == 114 + 3 * 22
    assert cmp['new']['step_violation_s'] == 118 + 3 * 22


def test_sets_of_different_runs_are_not_compared():
    with pytest.raises(ValueError, match=r'\(2, 1.0, 8\)'):
        dynamic_set.compare(_set(_rec(1, (4,)), _rec(2, (4,))),
                            _set(_rec(1, (4,))))


def test_the_default_set_is_the_protocols_sixteen_runs():
    runs = dynamic_set.PROTOCOL_RUNS
    assert len(set(runs)) == 16
    assert {cores for _, _, cores in runs} == {8, 10, 12, 14}
    assert {load for _, load, _ in runs} == {0.8, 1.0, 1.2}


def test_dynamic_set_runs_the_simulator_and_diffs_two_sets(tmp_path, capsys):
    out = str(tmp_path / 'a')
    assert cmd.main(['dynamic-set', '--run', '1,1.0,8', '--run', '2,0.8,8',
                     '--scale', '0.1', '--processes', '2', '--out',
                     out]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    with open(os.path.join(out, 'dynamic-set.json')) as f:
        data = json.load(f)
    assert [(r['seed'], r['load_scale'], r['cores'])
            for r in data['runs']] == [(1, 1.0, 8), (2, 0.8, 8)]
    assert lines[-1] == dynamic_set.result_line(data['summary'])
    assert lines[-1].startswith('RESULT runs=2 nginx_violation_s=')
    assert data['conditions'].startswith(
        'conditions: scale=0.1 runs=1/1/8,2/0.8/8 smt=2')
    # A set against itself: every step the same in both runs.
    other = str(tmp_path / 'b')
    assert cmd.main(['dynamic-set', '--run', '2,0.8,8', '--run', '1,1.0,8',
                     '--scale', '0.1', '--out', other, '--against',
                     os.path.join(out, 'dynamic-set.json')]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert '2 runs, paired' in lines
    summary = data['summary']
    assert lines[-1].startswith(
        'RESULT runs=2 step_s_base=%d step_s_new=%d '
        % ((summary['step_violation_s'],) * 2))
    paired = lines[lines.index('2 runs, paired') + 2:]
    steps = [line.split() for line in paired if 'violation' not in line
             and not line.startswith('RESULT')]
    assert len(steps) >= 5
    assert all(words[2:4] == ['0', '0'] for words in steps)


def test_bad_runs_and_files_are_refused_by_name(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cmd.main(['dynamic-set', '--run', '1,1.0'])
    assert 'SEED,LOAD_SCALE,CORES' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cmd.main(['dynamic-set', '--run', '1,0,8'])
    assert 'load scale must be > 0' in capsys.readouterr().err
    bad = tmp_path / 'bad.json'
    bad.write_text('{"grid": 1}')
    with pytest.raises(SystemExit):
        cmd.main(['dynamic-diff', str(bad), str(bad)])
    assert 'not a dynamic-set.json' in capsys.readouterr().err
