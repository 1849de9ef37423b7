"""``ufo-sim``: the paper's evaluation on the simulated host.

Subcommands (``ufo-sim <command> --help`` for options):

* ``grid [--quick]``: 2-VM co-location grids, CPUs per cell per manager,
  heatmaps, JSON, and one closing ``RESULT`` line;
* ``mal``: maximum aggregated load per CPU count, from a grid's JSON;
* ``dynamic``: changing load with nothing learned (paper Fig. 14);
* ``decompose``: vCPU-only, emulator-only, combined (paper Fig. 15).

Everything is written under ``--out`` (default ``ufo-sim-out``).
"""

import argparse
import dataclasses
import json
import math
import os
import sys
import time

from ufo_sim.managers import cell as cell_mod


def _option(text):
    """``name=value`` of a ControllerConfig field, value parsed as JSON."""
    from ufo_agent.controller import config
    name, sep, raw = text.partition('=')
    fields = {f.name for f in dataclasses.fields(config.ControllerConfig)}
    if not sep or name not in fields:
        raise argparse.ArgumentTypeError(
            '%r: expected NAME=VALUE with NAME one of %s'
            % (text, ', '.join(sorted(fields))))
    try:
        value = json.loads(raw)
    except ValueError:
        raise argparse.ArgumentTypeError('%r: bad value' % text)
    return name, value


def _settings(args, **quick):
    values = {'seed': args.seed,
              'ufo_config': tuple(getattr(args, 'ufo_option', None) or ())}
    for name in ('warmup', 'measure', 'converge', 'judge'):
        given = getattr(args, name, None)
        if given is not None:
            values[name] = given
        elif name in quick:
            values[name] = quick[name]
    return cell_mod.Settings(**values)


def _floats(text):
    return tuple(float(x) for x in text.split(','))


def _clean(value):
    """JSON has no infinity: p99 of a VM that served nothing is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def write_json(path, data):
    with open(path, 'w') as f:
        json.dump(_clean(data), f, indent=1, sort_keys=True)
        f.write('\n')


def _grid(args):
    from ufo_sim.experiments import grid as grid_mod
    from ufo_sim.experiments import report
    if args.quick:
        settings = _settings(args, converge=20, judge=6)
        loads = grid_mod.QUICK_LOADS
    else:
        settings = _settings(args)
        loads = grid_mod.FULL_LOADS
    if args.loads:
        loads = _floats(args.loads)
    mix_list = grid_mod.mixes(args.apps.split(',')) if args.apps else None
    managers = args.managers.split(',')
    started = time.monotonic()
    grid = grid_mod.run(settings, loads, managers, mix_list,
                        processes=args.processes, progress=sys.stderr,
                        timeout=args.task_timeout)
    os.makedirs(args.out, exist_ok=True)
    data = report.grid_report(grid, args.out, plots=_plots_wanted(args))
    write_json(os.path.join(args.out, 'grid.json'), data)
    print(report.grid_table(data))
    print('grid wall time: %.1f s' % (time.monotonic() - started))
    print(data['result_line'])
    return 0


def _mal(args):
    from ufo_sim.experiments import report
    with open(args.grid) as f:
        data = json.load(f)
    os.makedirs(args.out, exist_ok=True)
    out = report.mal_report(data, args.out, plots=_plots_wanted(args))
    write_json(os.path.join(args.out, 'mal.json'), out)
    print(report.mal_table(out))
    return 0


def _plots_wanted(args):
    """False with --no-plots, or (with a warning) without matplotlib."""
    if args.no_plots:
        return False
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.stderr.write('ufo-sim: matplotlib is not installed (pip install '
                         'ufo-nova[plot]): no figures\n')
        return False
    return True


def _finish(args, module, out, name):
    """Figures, JSON and the table of one experiment's output."""
    os.makedirs(args.out, exist_ok=True)
    if _plots_wanted(args):
        module.plot(out, args.out)
    write_json(os.path.join(args.out, name + '.json'), out)
    print(module.table(out))
    return 0


def _dynamic(args):
    from ufo_sim.experiments import dynamic
    out = dynamic.run(_settings(args), scale=args.scale,
                      managers=args.managers.split(','),
                      processes=args.processes, timeout=args.task_timeout)
    return _finish(args, dynamic, out, 'dynamic')


def _decompose(args):
    from ufo_sim.experiments import decompose
    out = decompose.run(_settings(args), apps=args.apps.split(','),
                        cpu_counts=[int(x) for x in args.cpus.split(',')],
                        vcpus=args.vcpus, processes=args.processes,
                        timeout=args.task_timeout)
    return _finish(args, decompose, out, 'decompose')


def parser():
    p = argparse.ArgumentParser(prog='ufo-sim', description=__doc__.split(
        '\n')[0])
    sub = p.add_subparsers(dest='command', required=True)

    def common(cmd, processes=True):
        cmd.add_argument('--seed', type=int, default=1,
                         help='base seed; same seed, same results')
        cmd.add_argument('--out', default='ufo-sim-out',
                         help='directory for JSON and PNG files')
        cmd.add_argument('--no-plots', action='store_true',
                         help='skip the PNG figures (no matplotlib)')
        if processes:
            cmd.add_argument('--processes', type=int, default=2,
                             help='worker processes (default 2)')
            cmd.add_argument('--task-timeout', type=float, default=300.0,
                             help='seconds one simulation task may take '
                                  'before it is killed and reported')
        cmd.add_argument('--warmup', type=float,
                         help='simulated seconds before measuring')
        cmd.add_argument('--measure', type=float,
                         help='simulated seconds measured per trial')
        cmd.add_argument('--converge', type=int,
                         help='control intervals (real seconds) the '
                              'feedback managers get to settle')
        cmd.add_argument('--judge', type=int,
                         help='control intervals judged after settling')
        cmd.add_argument('--ufo-option', type=_option, action='append',
                         metavar='NAME=VALUE',
                         help='what-if: override a [controller] option of '
                              'UFO (repeatable), e.g. sf_threshold=0.2')

    g = sub.add_parser('grid', help='2-VM co-location grids (Fig. 12/13)')
    common(g)
    g.add_argument('--quick', action='store_true',
                   help='coarser grid (4 loads) and shorter trials')
    g.add_argument('--loads', help='comma-separated load fractions')
    g.add_argument('--apps', help='profiles to pair (default: all three)')
    g.add_argument('--managers', default='default,dyniso,static,ufo,oracle')
    g.set_defaults(func=_grid)

    m = sub.add_parser('mal', help='maximum aggregated load per CPU count')
    common(m, processes=False)
    m.add_argument('--grid', default='ufo-sim-out/grid.json',
                   help='a grid.json written by "ufo-sim grid"')
    m.set_defaults(func=_mal)

    d = sub.add_parser('dynamic', help='load changes, nothing learned '
                                       '(Fig. 14)')
    common(d)
    d.add_argument('--scale', type=float, default=1.0,
                   help='stretch (>1) or shrink (<1) the 270 s timeline')
    d.add_argument('--managers', default='default,dyniso,ufo')
    d.set_defaults(func=_dynamic)

    c = sub.add_parser('decompose', help='vCPU-only, emulator-only, '
                                         'combined (Fig. 15)')
    common(c)
    c.add_argument('--apps', default='memcached,nginx,mysql')
    c.add_argument('--cpus', default='4,8,12,16',
                   help='host CPU counts to find the max load at')
    c.add_argument('--vcpus', type=int, default=16,
                   help='flavor size (the paper uses 16)')
    c.set_defaults(func=_decompose)
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
