"""The ``grid`` command: co-location grids (paper Fig. 12/13)."""

import os
import sys
import time

from ufo_sim.commands import common
from ufo_sim.managers import registry


def add_parser(subparsers):
    """Add ``grid`` to ``ufo-sim``'s subcommands."""
    cmd = subparsers.add_parser('grid', help='co-location grids (Fig. 12/13)')
    common.add_common(cmd)
    common.add_host(cmd)
    common.add_qos_target(cmd)
    cmd.add_argument('--quick', action='store_true',
                     help='coarser grid (4 loads) and shorter trials')
    cmd.add_argument('--seeds', type=common.positive_int, default=3,
                     help='seeds per cell, from --seed up, every manager on '
                          'the same (default: 3); a cell is met when it is '
                          'met on each')
    cmd.add_argument('--loads', help='comma-separated load fractions of '
                                     'each profile\'s max load')
    which = cmd.add_mutually_exclusive_group()
    which.add_argument('--apps', type=common.apps,
                       help='profiles to pair (default: all three, every '
                            'pair)')
    which.add_argument('--pairs', type=common.mixes(2), action='append',
                       metavar='A+B,...',
                       help='pairs to run, e.g. memcached+nginx,mysql+mysql')
    which.add_argument('--mix', type=common.mixes(), action='append',
                       metavar='A+B+C,...',
                       help='mixes of any number of VMs, one per profile '
                            'named, e.g. memcached+nginx+mysql: the cells '
                            'are every combination of --loads')
    cmd.add_argument('--managers', default='default,dyniso,static,ufo,oracle',
                     type=common.grid_managers,
                     help='comma-separated managers to run, of: %s. '
                          'oracle-wide is the Oracle over a larger space '
                          '(a VM\'s emulator threads may run on its own '
                          'cores) and costs up to 2^VMs times as much'
                          % ', '.join(registry.MANAGERS))
    cmd.add_argument('--keep-from', metavar='GRID.json',
                     help='a grid.json of an earlier run of the same grid: '
                          'its results of the managers not run here are '
                          'kept (not UFO\'s; for managers whose code did not '
                          'change since), so UFO alone can be run again')
    cmd.set_defaults(func=run, usage=cmd)
    return cmd


def run(args):
    from ufo_sim.experiments import grid as grid_mod
    from ufo_sim.experiments import report
    if args.quick:
        settings = common.settings(args, converge=20, judge=6)
        loads = grid_mod.QUICK_LOADS
    else:
        settings = common.settings(args)
        loads = grid_mod.FULL_LOADS
    if args.loads:
        loads = common.floats(args.loads)
    mix_list = None
    if args.apps:
        mix_list = grid_mod.mixes(args.apps.split(','))
    elif args.pairs or args.mix:
        mix_list = [m for given in args.pairs or args.mix for m in given]
    common.checked(settings, [grid_mod.cells_of(m, loads[:1])[0]
                              for m in mix_list or grid_mod.mixes()])
    managers = args.managers.split(',')
    saved = None
    if args.keep_from:
        saved = common.read_grid(args.keep_from)
        try:
            grid_mod.check_kept(settings, loads, mix_list or grid_mod.mixes(),
                                managers, saved)
        except (KeyError, TypeError, ValueError) as exc:
            raise common.UsageError('--keep-from %s: %s'
                                    % (args.keep_from, exc))
    started = time.monotonic()
    grid = grid_mod.run(settings, loads, managers, mix_list,
                        processes=args.processes, progress=sys.stderr,
                        timeout=args.task_timeout)
    os.makedirs(args.out, exist_ok=True)
    data = grid.to_json()
    if saved is not None:
        data = grid_mod.keep_from(data, saved)
    data = report.grid_report(data, args.out, plots=common.plots_wanted(args))
    common.write_json(os.path.join(args.out, 'grid.json'), data)
    print(report.grid_table(data))
    print('grid wall time: %.1f s' % (time.monotonic() - started))
    print(data['yardstick_line'])
    print(data['conditions'])
    print(data['result_line'])
    return 0
