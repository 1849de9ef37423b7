"""The ``dynamic-diff`` command: two saved dynamic sets, paired."""

from ufo_sim.commands import common
from ufo_sim.commands import dynamic_set


def add_parser(subparsers):
    """Add ``dynamic-diff`` to ``ufo-sim``'s subcommands."""
    cmd = subparsers.add_parser(
        'dynamic-diff', help='two dynamic-set.json files of '
                             'the same runs, paired per '
                             'load step')
    cmd.add_argument('base', help='the baseline dynamic-set.json')
    cmd.add_argument('new', help='the dynamic-set.json judged against it')
    cmd.set_defaults(func=run, usage=cmd)
    return cmd


def run(args):
    dynamic_set.print_comparison(common.read_set(args.base),
                                 common.read_set(args.new))
    return 0
