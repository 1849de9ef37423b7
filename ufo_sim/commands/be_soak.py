"""The ``be-soak`` command: BE guests in the idle pool or soaking."""

import os
import sys

from ufo_sim.commands import common


def add_parser(subparsers):
    """Add ``be-soak`` to ``ufo-sim``'s subcommands."""
    cmd = subparsers.add_parser(
        'be-soak', help='BE guests in the idle pool or '
                        'soaking every core (SCHED_IDLE)')
    common.add_common(cmd)
    common.add_host(cmd)
    cmd.add_argument('--quick', action='store_true',
                     help='loads %s only, shorter settling (a few minutes '
                          'on 2 cores)' % ','.join('%g' % x for x in
                                                   (0.2, 0.5)))
    cmd.add_argument('--loads', help='comma-separated load fractions '
                                     '(default: the quick grid\'s)')
    cmd.add_argument('--pairs', type=common.mixes(2), action='append',
                     metavar='A+B,...',
                     help='LC pairs to run (default: all of the grid\'s)')
    cmd.set_defaults(func=run, usage=cmd)
    return cmd


def run(args):
    from ufo_sim.experiments import be_soak
    from ufo_sim.experiments import grid as grid_mod
    if args.quick:
        settings = common.settings(args, converge=20, judge=6)
        loads = be_soak.QUICK_LOADS
    else:
        settings = common.settings(args)
        loads = grid_mod.QUICK_LOADS
    if args.loads:
        loads = common.floats(args.loads)
    mix_list = [m for given in args.pairs for m in given] \
        if args.pairs else None
    common.checked(settings, [grid_mod.cells_of(m, loads[:1])[0]
                              for m in mix_list or grid_mod.mixes()])
    out = be_soak.run(settings, loads, mix_list, processes=args.processes,
                      timeout=args.task_timeout)
    os.makedirs(args.out, exist_ok=True)
    common.write_json(os.path.join(args.out, 'be-soak.json'), out)
    print(be_soak.table(out))
    if not out['soak_supported']:
        sys.stderr.write('ufo-sim be-soak: %s\n' % be_soak.UNSUPPORTED)
        return 1
    return 0
