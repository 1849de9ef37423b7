"""The ``allocation`` command: fixed allocations of one cell."""

import argparse
import dataclasses
import os

from ufo_sim.commands import common
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import scenario


def _cell(text):
    """``profile@load%+...``, e.g. ``nginx@50+mysql@20``."""
    profiles = ', '.join(sorted(scenario.PROFILES))
    try:
        cell = cell_mod.Cell.from_key(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError('%s, profiles %s' % (exc, profiles))
    for vm in cell.vms:
        if vm.profile not in scenario.PROFILES:
            raise argparse.ArgumentTypeError(
                '%r: unknown profile, profiles %s' % (vm.profile, profiles))
    return cell


def _allocation_arg(text):
    from ufo_sim.experiments import allocation
    try:
        return allocation.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def add_parser(subparsers):
    """Add ``allocation`` to ``ufo-sim``'s subcommands."""
    cmd = subparsers.add_parser(
        'allocation', help='fixed allocations of one cell, '
                           'as the Oracle judges them')
    common.add_common(cmd, processes=False, feedback=False)
    common.add_host(cmd)
    cmd.add_argument('--cell', type=_cell, required=True,
                     metavar='PROFILE@LOAD+...',
                     help='the VMs and their loads in %% of max load, e.g. '
                          'nginx@50+mysql@20')
    cmd.add_argument('allocations', type=_allocation_arg, nargs='+',
                     metavar='CORES,.../EMULATOR',
                     help='cores of each VM\'s pool, then of the shared '
                          'emulator pool (0: each VM\'s emulator threads on '
                          'its own cores), e.g. 2,1/2 3,1/2')
    cmd.set_defaults(func=run, usage=cmd)
    return cmd


def run(args):
    from ufo_sim.experiments import allocation
    settings = common.checked(common.settings(args), [args.cell])
    try:
        results = allocation.run(args.cell, settings, args.allocations)
    except ValueError as exc:
        raise common.UsageError(str(exc))
    os.makedirs(args.out, exist_ok=True)
    common.write_json(os.path.join(args.out, 'allocation.json'), {
        'cell': args.cell.key, 'conditions': settings.describe(),
        'allocations': [dataclasses.asdict(r) for r in results]})
    print(allocation.table(args.cell, results))
    return 0
