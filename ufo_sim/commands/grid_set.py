"""The ``grid-set`` command: the held-out grid protocol."""

import argparse
import os
import sys

from ufo_sim import arguments
from ufo_sim.commands import common


def _protocol_names():
    from ufo_sim.experiments import grid_set
    return list(grid_set.BY_NAME)


def _set_runs(text):
    from ufo_sim.experiments import grid_set
    names = text.split(',')
    for name in names:
        if name not in grid_set.BY_NAME:
            raise argparse.ArgumentTypeError('%r: not one of %s' % (
                name, ', '.join(grid_set.BY_NAME)))
    return names


def _saved_grid(text):
    """``NAME=GRID.json``: a grid of the protocol run earlier."""
    from ufo_sim.experiments import grid_set
    name, sep, path = text.partition('=')
    if not sep or name not in grid_set.BY_NAME:
        raise argparse.ArgumentTypeError(
            '%r: expected NAME=GRID.json with NAME one of %s'
            % (text, ', '.join(grid_set.BY_NAME)))
    return name, path


def add_parser(subparsers):
    """Add ``grid-set`` to ``ufo-sim``'s subcommands."""
    cmd = subparsers.add_parser(
        'grid-set', help='the held-out grid protocol (or '
                         'any of its grids by name), '
                         'optionally paired with a '
                         'baseline set')
    cmd.add_argument('--out', default='ufo-sim-out',
                     help='directory for grid-set.json and each grid\'s '
                          'NAME/grid.json')
    common.add_workers(cmd, timeout=600.0)
    cmd.add_argument('--ufo-option', type=arguments.controller_option,
                     action='append',
                     metavar='NAME=VALUE',
                     help='what-if: override a [controller] option of UFO '
                          '(repeatable); the grids\' own settings are the '
                          'protocol\'s')
    cmd.add_argument('--run', type=_set_runs, action='append',
                     metavar='NAME,...',
                     help='grids to run, by name (repeatable; default: the '
                          'held-out ones, H1 to H9). Names: %s' % ', '.join(
                              _protocol_names()))
    cmd.add_argument('--from-grid', type=_saved_grid, action='append',
                     metavar='NAME=GRID.json',
                     help='take grid NAME from a grid.json of an earlier run '
                          '(repeatable; checked to be that grid, with the '
                          'same UFO options); with only these, nothing is '
                          'simulated')
    cmd.add_argument('--managers', default='ufo,oracle',
                     type=common.grid_managers,
                     help='comma-separated managers (default ufo,oracle)')
    cmd.add_argument('--oracle-from', metavar='GRID-SET.JSON',
                     help="a saved set whose Oracle results are reused for "
                          "the same grids (the Oracle does not depend on "
                          "UFO's options)")
    cmd.add_argument('--against', metavar='GRID-SET.JSON',
                     help='a baseline set to compare with, cell by cell, '
                          'for the grids both hold')
    cmd.set_defaults(func=run, usage=cmd)
    return cmd


def run(args):
    from ufo_sim.experiments import grid_set
    saved = {}
    for name, path in args.from_grid or ():
        saved[name] = common.read_grid(path)
    names = [n for given in args.run or () for n in given]
    if not names and not saved:
        names = list(grid_set.HELD_OUT)
    managers = args.managers.split(',')
    base, oracle_from = (
        common.read_set(path, 'grid-set.json') if path else None
        for path in (args.against, args.oracle_from))
    ufo_config = tuple(args.ufo_option or ())
    try:
        grid_set.check_saved(saved, ufo_config)
    except (KeyError, TypeError, ValueError) as exc:
        raise common.UsageError('--from-grid: %s' % exc)
    for name in names:
        protocol_run = grid_set.BY_NAME[name]
        common.checked(protocol_run.settings(ufo_config),
                       protocol_run.first_cells())
    os.makedirs(args.out, exist_ok=True)

    def save(name, data):
        os.makedirs(os.path.join(args.out, name), exist_ok=True)
        common.write_json(os.path.join(args.out, name, 'grid.json'), data)

    out = grid_set.run(names, managers, ufo_config, args.processes,
                       args.task_timeout, oracle_from, save, sys.stderr,
                       saved)
    grid_set.dump(common.clean(out), os.path.join(args.out, 'grid-set.json'))
    print(grid_set.table(out))
    if base is not None:
        try:
            print(grid_set.compare_table(grid_set.compare(base, out)))
        except ValueError as exc:
            raise common.UsageError(str(exc))
    return 0
