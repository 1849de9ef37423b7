"""The ``edge`` command: the Oracle's allocations, read by rule."""

import json
import os

from ufo_sim.commands import common


def add_parser(subparsers):
    """Add ``edge`` to ``ufo-sim``'s subcommands."""
    cmd = subparsers.add_parser(
        'edge', help="the Oracle's allocations of a saved "
                     "grid run, read with the controller's "
                     'rules')
    cmd.add_argument('grid', metavar='GRID.json',
                     help='grid.json of a run with the Oracle; its settings '
                          '(seed, host, flavors, UFO options) are reused')
    cmd.add_argument('--out', default='ufo-sim-out',
                     help='directory for edge.json')
    common.add_workers(cmd, timeout=600.0)
    cmd.set_defaults(func=run, usage=cmd)
    return cmd


def run(args):
    from ufo_sim.experiments import edge
    try:
        with open(args.grid) as f:
            grid_json = json.load(f)
        edge.settings_of(grid_json)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise common.UsageError('%s: not a saved ufo-sim grid run (%s)'
                                % (args.grid, exc))
    if not any(r.get('manager') == 'oracle'
               for r in grid_json.get('results', ())):
        raise common.UsageError('%s: no Oracle results; run the grid with '
                                '--managers ...,oracle' % args.grid)
    out = edge.run(grid_json, processes=args.processes,
                   timeout=args.task_timeout)
    os.makedirs(args.out, exist_ok=True)
    common.write_json(os.path.join(args.out, 'edge.json'), out)
    print(edge.table(out))
    return 0
