"""``ufo-sim results``: every committed result file has its producer."""

import os
import subprocess

import pytest

from ufo_sim.calibration import __main__ as calibration
from ufo_sim import cmd
from ufo_sim.commands import results

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
STATIC = os.path.join(ROOT, 'doc', 'source', '_static')
RESULT_DIRS = ('sim', 'demo')


def _committed():
    found = set()
    for sub in RESULT_DIRS:
        for name in os.listdir(os.path.join(STATIC, sub)):
            found.add(sub + '/' + name)
    return found


def test_the_steps_write_every_committed_result_file_once():
    dests = [dest for step in results.STEPS for _, dest in step.copies]
    assert len(dests) == len(set(dests))
    assert set(dests) == _committed()


def test_dry_run_lists_each_command_and_copy_and_runs_nothing(
        tmp_path, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError('dry run ran %r' % (args,))
    monkeypatch.setattr(subprocess, 'call', refuse)
    scratch = str(tmp_path / 'scratch')
    assert cmd.main(['results', '--dry-run', '--root', ROOT,
                     '--scratch', scratch]) == 0
    out = capsys.readouterr().out
    for step in results.STEPS:
        assert '%s: %s' % (step.name, results.shown(step, scratch)) in out
        for src, dest in step.copies:
            assert 'copy %s -> %s' % (
                os.path.join(scratch, step.name, src),
                os.path.join(ROOT, 'doc', 'source', '_static', dest)) in out
    assert 'ufo-sim grid --quick --processes 2 --out %s/grid-quick' \
        % scratch in out
    assert not os.path.exists(scratch)


def test_every_step_parses_with_the_command_it_runs(tmp_path, monkeypatch):
    called = []
    for name in ('figures', 'check', 'ablation'):
        monkeypatch.setattr(calibration, name,
                            lambda args, name=name: called.append(name))
    for step in results.STEPS:
        argv = results.command(step, str(tmp_path))
        if argv[1:3] == ['-m', 'ufo_sim.cmd']:
            args = cmd.parser().parse_args(argv[3:])
            assert args.func.__module__.startswith('ufo_sim.commands.')
        elif argv[1:3] == ['-m', 'ufo_sim.calibration']:
            assert calibration.main(argv[3:]) == 0
            assert called[-1] == argv[3]
        else:
            assert os.access(os.path.join(ROOT, argv[0]), os.X_OK)


def test_a_grid_set_step_reads_the_grids_written_before_it(tmp_path):
    order = [s.name for s in results.STEPS]
    for step in results.STEPS:
        for arg in results.command(step, str(tmp_path)):
            for name in order:
                if '%s/%s/' % (tmp_path, name) in arg:
                    assert order.index(name) < order.index(step.name)


def test_only_and_skip_pick_steps_in_order():
    assert [s.name for s in results.selected(only=['dynamic', 'grid-quick'])
            ] == ['grid-quick', 'dynamic']
    assert 'demo' not in [s.name for s in results.selected(skip=['demo'])]
    with pytest.raises(SystemExit):
        cmd.parser().parse_args(['results', '--only', 'nonesuch'])
