"""The ``mal`` command: maximum aggregated load per CPU count."""

import json
import os

from ufo_sim.commands import common


def add_parser(subparsers):
    """Add ``mal`` to ``ufo-sim``'s subcommands."""
    cmd = subparsers.add_parser(
        'mal', help='maximum aggregated load per CPU count')
    common.add_common(cmd, processes=False)
    cmd.add_argument('--grid', default='ufo-sim-out/grid.json',
                     help='a grid.json written by "ufo-sim grid"')
    cmd.set_defaults(func=run, usage=cmd)
    return cmd


def run(args):
    from ufo_sim.experiments import report
    with open(args.grid) as f:
        data = json.load(f)
    os.makedirs(args.out, exist_ok=True)
    out = report.mal_report(data, args.out, plots=common.plots_wanted(args))
    common.write_json(os.path.join(args.out, 'mal.json'), out)
    print(report.mal_table(out))
    return 0
