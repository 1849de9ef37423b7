"""The ``dynamic-set`` command: UFO on many dynamic runs, summed."""

import argparse
import dataclasses
import os

from ufo_sim.commands import common


def _run_triple(text):
    try:
        seed, load_scale, cores = text.split(',')
        value = (int(seed), float(load_scale), int(cores))
    except ValueError:
        raise argparse.ArgumentTypeError(
            '%r: expected SEED,LOAD_SCALE,CORES, e.g. 2,0.8,10' % text)
    if not value[1] > 0 or value[2] < 1:
        raise argparse.ArgumentTypeError(
            '%r: the load scale must be > 0 and cores >= 1' % text)
    return value


def print_comparison(base, new):
    from ufo_sim.experiments import dynamic_set
    try:
        print(dynamic_set.compare_table(dynamic_set.compare(base, new)))
    except ValueError as exc:
        raise common.UsageError(str(exc))


def add_parser(subparsers):
    """Add ``dynamic-set`` to ``ufo-sim``'s subcommands."""
    cmd = subparsers.add_parser(
        'dynamic-set', help='UFO on many dynamic runs (seeds, loads, host '
                            'sizes), summed; optionally paired with a '
                            'baseline set')
    common.add_common(cmd, seed_and_plots=False)
    common.add_host(cmd, cores=False)
    common.add_qos_target(cmd)
    cmd.add_argument('--run', type=_run_triple, action='append',
                     metavar='SEED,LOAD_SCALE,CORES',
                     help='one run (repeatable; default: the sixteen of the '
                          'held-out protocol in sim-results)')
    cmd.add_argument('--scale', type=common.positive, default=1.0,
                     help='stretch (>1) or shrink (<1) the 270 s timeline')
    cmd.add_argument('--against', metavar='DYNAMIC-SET.JSON',
                     help='a baseline set of the same runs to compare with, '
                          'run by run and load step by load step')
    cmd.set_defaults(func=run, usage=cmd)
    return cmd


def run(args):
    from ufo_sim.experiments import dynamic
    from ufo_sim.experiments import dynamic_set
    runs = tuple(args.run or dynamic_set.PROTOCOL_RUNS)
    settings = common.settings(args)
    for _, load_scale, cores in runs:
        common.checked(dataclasses.replace(settings, cores=cores),
                       [dynamic.first_cell(load_scale)], cores)
    base = common.read_set(args.against) if args.against else None
    if base is not None:
        theirs = sorted(dynamic_set.run_key(r) for r in base['runs'])
        if theirs != sorted(runs):
            raise common.UsageError('--against %s holds other runs: %s' % (
                args.against, ' '.join('%d,%g,%d' % r for r in theirs)))
    out = dynamic_set.run(settings, runs, scale=args.scale,
                          processes=args.processes,
                          timeout=args.task_timeout)
    os.makedirs(args.out, exist_ok=True)
    common.write_json(os.path.join(args.out, 'dynamic-set.json'), out)
    print(dynamic_set.table(out))
    if base is not None:
        print_comparison(base, out)
    return 1 if out['errors'] else 0
