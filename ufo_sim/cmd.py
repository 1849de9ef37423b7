"""``ufo-sim``: the paper's evaluation on the simulated host.

Subcommands (``ufo-sim <command> --help`` for options):

* ``grid [--quick]``: co-location grids (pairs, or any mix of VMs), each
  cell on three seeds shared by the managers, CPUs per cell per manager,
  heatmaps, JSON, a ``RESULT`` line setting UFO beside the Oracle cell by
  cell, and one closing ``RESULT`` line after a ``conditions:`` line
  naming the settings that produced it;
* ``mal``: maximum aggregated load per CPU count, from a grid's JSON;
* ``dynamic``: changing load with nothing learned (paper Fig. 14);
* ``dynamic-set``: UFO on many dynamic runs (seeds, load scales, host
  sizes), summed, with a ``RESULT`` line; ``--against`` a saved set of
  the same runs (or ``dynamic-diff`` of two saved sets) pairs them per
  load step;
* ``grid-set``: the held-out grid protocol (H1-H9, and the tuning
  grids by name) as one command: each grid's JSON, the set's JSON, two
  ``RESULT`` lines per grid and the recall over the set; ``--against``
  a saved set pairs them cell by cell (cells lost and gained,
  Oracle-met cells missed), and ``--oracle-from`` reuses a saved set's
  Oracle results;
* ``decompose``: vCPU-only, emulator-only, combined (paper Fig. 15);
* ``allocation``: fixed allocations of one cell, measured as the Oracle
  judges them, with the utilization, per-core utilization and SF the
  agent would see and the emulator threads' run delay the host sees;
* ``edge GRID.json``: the Oracle's allocations of a saved grid run and
  their one-core neighbours, read with the controller's rules: which
  rule holds a pool above the Oracle's size, which lets it step down
  onto a QoS miss, whether any threshold on a signal separates the
  two, and UFO's CPUs against the Oracle's plus a core for each pool a
  rule grows there (a ``RESULT`` line);
* ``be-soak [--quick]``: LC pairs plus one BE VM under UFO, BE guests in
  the idle pool against BE soak mode (SCHED_IDLE on every core), with a
  closing ``RESULT`` line;
* ``demo``: ufo-demo's scenario (an LC VM light, busy and quiet beside a
  BE batch VM and an idle VM) without and with the agent.

Everything is written under ``--out`` (default ``ufo-sim-out``). Grid
and dynamic take held-out conditions nobody tuned on: ``--cores``,
``--smt``, ``--vcpus``, ``--host-option`` (any HostSpec field), ``--seed``
and the loads.
"""

import argparse
import dataclasses
import json
import math
import os
import sys
import time

from ufo_sim import arguments
from ufo_sim.commands import cluster as cluster_cmd
from ufo_sim.engine import spec as spec_mod
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import registry
from ufo_sim.managers import scenario
from ufo_sim import profiles as profiles_mod

SMT = {'on': 2, 'off': 1}


class UsageError(Exception):
    """Options that parse but describe a host that cannot be built."""


def _name_value(text, fields):
    name, sep, raw = text.partition('=')
    if not sep or name not in fields:
        raise argparse.ArgumentTypeError(
            '%r: expected NAME=VALUE with NAME one of %s'
            % (text, ', '.join(sorted(fields))))
    try:
        value = json.loads(raw)
    except ValueError:
        raise argparse.ArgumentTypeError('%r: bad value (not JSON)' % text)
    return name, value


def _option(text):
    """``name=value`` of a ControllerConfig field, value parsed as JSON."""
    from ufo_agent.controller import config
    return _name_value(text, {
        f.name for f in dataclasses.fields(config.ControllerConfig)})


def _host_option(text):
    """``name=value`` of a HostSpec field (spec.parse_option)."""
    try:
        return spec_mod.parse_option(
            text, {f.name for f in dataclasses.fields(spec_mod.HostSpec)})
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def _vcpus(text):
    """``N`` for every VM or ``PROFILE=N``, comma-separated."""
    out = []
    for item in text.split(','):
        name, sep, raw = item.rpartition('=')
        name = name if sep else '*'
        if name != '*' and name not in scenario.PROFILES:
            raise argparse.ArgumentTypeError(
                '%r: profile not one of %s'
                % (item, ', '.join(sorted(scenario.PROFILES))))
        try:
            count = int(raw)
        except ValueError:
            count = 0
        if count < 1:
            raise argparse.ArgumentTypeError('%r: expected N or PROFILE=N '
                                             'with N >= 1' % item)
        out.append((name, count))
    return out


def _mixes(size=None):
    """A parser of comma-separated mixes such as ``memcached+nginx``."""
    def parse(text):
        out = []
        for item in text.split(','):
            apps = tuple(item.split('+'))
            if any(a not in scenario.PROFILES for a in apps) or \
                    (size and len(apps) != size):
                raise argparse.ArgumentTypeError(
                    '%r: expected %s of %s joined by "+"' % (
                        item, '%d profiles' % size if size else 'profiles',
                        ', '.join(sorted(scenario.PROFILES))))
            out.append(apps)
        return out
    return parse


def _apps(text):
    for app in text.split(','):
        if app not in scenario.PROFILES:
            raise argparse.ArgumentTypeError('%r: not one of %s' % (
                app, ', '.join(sorted(scenario.PROFILES))))
    return text


def _grid_managers(text):
    for name in text.split(','):
        if name not in registry.MANAGERS:
            raise argparse.ArgumentTypeError('%r: not one of %s' % (
                name, ', '.join(registry.MANAGERS)))
    return text


def _positive(text):
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError('%r: must be > 0' % text)
    return value


def _positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError('must be at least 1: %r' % text)
    return value


def _settings(args, **quick):
    values = {'seed': getattr(args, 'seed', 1),
              'seeds': getattr(args, 'seeds', 1),
              'ufo_config': tuple(getattr(args, 'ufo_option', None) or ())}
    for name in ('warmup', 'measure', 'converge', 'judge'):
        given = getattr(args, name, None)
        if given is not None:
            values[name] = given
        elif name in quick:
            values[name] = quick[name]
    host = dict(getattr(args, 'host_option', None) or ())
    smt = getattr(args, 'smt', None)
    flags = {'cores': getattr(args, 'cores', None),
             'smt': SMT[smt] if smt else None}
    # The host's size is a setting of its own: the budget follows it.
    for name, flag in flags.items():
        if name in host and flag is not None and host[name] != flag:
            raise UsageError('--%s and --host-option %s=%s disagree'
                             % (name, name, host[name]))
        if name in host or flag is not None:
            values[name] = host.pop(name) if name in host else flag
    values['host_options'] = tuple(sorted(host.items()))
    values['profile_options'] = tuple(sorted(dict(
        getattr(args, 'profile_option', None) or ()).items()))
    sizes = [pair for given in getattr(args, 'vm_vcpus', None) or ()
             for pair in given]
    values['vcpus'] = tuple(dict(sizes).items())
    return cell_mod.Settings(**values)


def _checked(settings, cells, *cores):
    """``settings``, once a host of each cell (and size) builds."""
    try:
        scenario.check(settings, cells)
        for size in cores:
            scenario.fit_cores(settings, size)
    except (TypeError, ValueError) as exc:
        raise UsageError('no host can be built with %s: %s'
                         % (settings.describe(), exc))
    return settings


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
    mix_list = None
    if args.apps:
        mix_list = grid_mod.mixes(args.apps.split(','))
    elif args.pairs or args.mix:
        mix_list = [m for given in args.pairs or args.mix for m in given]
    _checked(settings, [grid_mod.cells_of(m, loads[:1])[0]
                        for m in mix_list or grid_mod.mixes()])
    managers = args.managers.split(',')
    saved = None
    if args.keep_from:
        saved = _read_grid(args.keep_from)
        try:
            grid_mod.check_kept(settings, loads, mix_list or grid_mod.mixes(),
                                managers, saved)
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError('--keep-from %s: %s' % (args.keep_from, exc))
    started = time.monotonic()
    grid = grid_mod.run(settings, loads, managers, mix_list,
                        processes=args.processes, progress=sys.stderr,
                        timeout=args.task_timeout)
    os.makedirs(args.out, exist_ok=True)
    data = grid.to_json()
    if saved is not None:
        data = grid_mod.keep_from(data, saved)
    data = report.grid_report(data, args.out, plots=_plots_wanted(args))
    write_json(os.path.join(args.out, 'grid.json'), data)
    print(report.grid_table(data))
    print('grid wall time: %.1f s' % (time.monotonic() - started))
    print(data['yardstick_line'])
    print(data['conditions'])
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
    settings = _settings(args)
    _checked(settings, [dynamic.first_cell(args.load_scale)],
             settings.cores + dynamic.EMULATOR_CORES)
    out = dynamic.run(settings, scale=args.scale,
                      managers=args.managers.split(','),
                      processes=args.processes, timeout=args.task_timeout,
                      load_scale=args.load_scale)
    return _finish(args, dynamic, out, 'dynamic')


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


def _read_grid(path):
    """A grid.json of an earlier ``ufo-sim grid`` run."""
    try:
        with open(path) as f:
            out = json.load(f)
    except (OSError, ValueError) as exc:
        raise UsageError('%s: not a grid.json (%s)' % (path, exc))
    if not isinstance(out, dict) or not all(
            k in out for k in ('settings', 'loads', 'mixes', 'managers',
                               'results')):
        raise UsageError('%s: not a grid.json (no settings, loads, mixes, '
                         'managers or results)' % path)
    return out


def _read_set(path, kind='dynamic-set.json'):
    """A saved set of runs (``kind`` names the file in errors)."""
    try:
        with open(path) as f:
            out = json.load(f)
    except (OSError, ValueError) as exc:
        raise UsageError('%s: not a %s (%s)' % (path, kind, exc))
    if not isinstance(out, dict) or not isinstance(out.get('runs'), list):
        raise UsageError('%s: not a %s (no runs)' % (path, kind))
    return out


def _dynamic_set(args):
    from ufo_sim.experiments import dynamic
    from ufo_sim.experiments import dynamic_set
    runs = tuple(args.run or dynamic_set.PROTOCOL_RUNS)
    settings = _settings(args)
    for _, load_scale, cores in runs:
        _checked(dataclasses.replace(settings, cores=cores),
                 [dynamic.first_cell(load_scale)], cores)
    base = _read_set(args.against) if args.against else None
    if base is not None:
        theirs = sorted(dynamic_set.run_key(r) for r in base['runs'])
        if theirs != sorted(runs):
            raise UsageError('--against %s holds other runs: %s' % (
                args.against, ' '.join('%d,%g,%d' % r for r in theirs)))
    out = dynamic_set.run(settings, runs, scale=args.scale,
                          processes=args.processes,
                          timeout=args.task_timeout)
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, 'dynamic-set.json'), out)
    print(dynamic_set.table(out))
    if base is not None:
        _print_comparison(base, out)
    return 1 if out['errors'] else 0


def _dynamic_diff(args):
    _print_comparison(_read_set(args.base), _read_set(args.new))
    return 0


def _print_comparison(base, new):
    from ufo_sim.experiments import dynamic_set
    try:
        print(dynamic_set.compare_table(dynamic_set.compare(base, new)))
    except ValueError as exc:
        raise UsageError(str(exc))


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


def _grid_set(args):
    from ufo_sim.experiments import grid_set
    saved = {}
    for name, path in args.from_grid or ():
        saved[name] = _read_grid(path)
    names = [n for given in args.run or () for n in given]
    if not names and not saved:
        names = list(grid_set.HELD_OUT)
    managers = args.managers.split(',')
    base, oracle_from = (
        _read_set(path, 'grid-set.json') if path else None
        for path in (args.against, args.oracle_from))
    ufo_config = tuple(args.ufo_option or ())
    try:
        grid_set.check_saved(saved, ufo_config)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError('--from-grid: %s' % exc)
    for name in names:
        protocol_run = grid_set.BY_NAME[name]
        _checked(protocol_run.settings(ufo_config),
                 protocol_run.first_cells())
    os.makedirs(args.out, exist_ok=True)

    def save(name, data):
        os.makedirs(os.path.join(args.out, name), exist_ok=True)
        write_json(os.path.join(args.out, name, 'grid.json'), data)

    out = grid_set.run(names, managers, ufo_config, args.processes,
                       args.task_timeout, oracle_from, save, sys.stderr,
                       saved)
    grid_set.dump(_clean(out), os.path.join(args.out, 'grid-set.json'))
    print(grid_set.table(out))
    if base is not None:
        try:
            print(grid_set.compare_table(grid_set.compare(base, out)))
        except ValueError as exc:
            raise UsageError(str(exc))
    return 0


def _decompose(args):
    from ufo_sim.experiments import decompose
    out = decompose.run(_settings(args), apps=args.apps.split(','),
                        cpu_counts=[int(x) for x in args.cpus.split(',')],
                        vcpus=args.vcpus, processes=args.processes,
                        timeout=args.task_timeout)
    return _finish(args, decompose, out, 'decompose')


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


def _allocation(args):
    from ufo_sim.experiments import allocation
    settings = _checked(_settings(args), [args.cell])
    try:
        results = allocation.run(args.cell, settings, args.allocations)
    except ValueError as exc:
        raise UsageError(str(exc))
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, 'allocation.json'), {
        'cell': args.cell.key, 'conditions': settings.describe(),
        'allocations': [dataclasses.asdict(r) for r in results]})
    print(allocation.table(args.cell, results))
    return 0


def _edge(args):
    from ufo_sim.experiments import edge
    try:
        with open(args.grid) as f:
            grid_json = json.load(f)
        edge.settings_of(grid_json)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError('%s: not a saved ufo-sim grid run (%s)'
                         % (args.grid, exc))
    if not any(r.get('manager') == 'oracle'
               for r in grid_json.get('results', ())):
        raise UsageError('%s: no Oracle results; run the grid with '
                         '--managers ...,oracle' % args.grid)
    out = edge.run(grid_json, processes=args.processes,
                   timeout=args.task_timeout)
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, 'edge.json'), out)
    print(edge.table(out))
    return 0


def _be_soak(args):
    from ufo_sim.experiments import be_soak
    from ufo_sim.experiments import grid as grid_mod
    if args.quick:
        settings = _settings(args, converge=20, judge=6)
        loads = be_soak.QUICK_LOADS
    else:
        settings = _settings(args)
        loads = grid_mod.QUICK_LOADS
    if args.loads:
        loads = _floats(args.loads)
    mix_list = [m for given in args.pairs for m in given] \
        if args.pairs else None
    _checked(settings, [grid_mod.cells_of(m, loads[:1])[0]
                        for m in mix_list or grid_mod.mixes()])
    out = be_soak.run(settings, loads, mix_list, processes=args.processes,
                      timeout=args.task_timeout)
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, 'be-soak.json'), out)
    print(be_soak.table(out))
    if not out['soak_supported']:
        sys.stderr.write('ufo-sim be-soak: %s\n' % be_soak.UNSUPPORTED)
        return 1
    return 0


def _demo(args):
    from ufo_sim.experiments import demo
    settings = _settings(args, **demo.QUICK)
    out = demo.run(settings, processes=args.processes,
                   timeout=args.task_timeout)
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, 'demo.json'), out)
    print(demo.table(out))
    return 1 if any('error' in r for r in out['results']) else 0


def _protocol_names():
    from ufo_sim.experiments import grid_set
    return list(grid_set.BY_NAME)


def parser():
    p = argparse.ArgumentParser(prog='ufo-sim', description=__doc__.split(
        '\n')[0])
    sub = p.add_subparsers(dest='command', required=True)

    def workers(cmd, timeout=300.0):
        arguments.workers(cmd)
        cmd.add_argument('--task-timeout', type=float, default=timeout,
                         help='seconds one simulation task may take '
                              'before it is killed and reported')

    def common(cmd, processes=True, feedback=True, seed_and_plots=True):
        if seed_and_plots:
            cmd.add_argument('--seed', type=int, default=1,
                             help='base seed; same seed, same results')
        cmd.add_argument('--out', default='ufo-sim-out',
                         help='directory for JSON and PNG files')
        if seed_and_plots:
            cmd.add_argument('--no-plots', action='store_true',
                             help='skip the PNG figures (no matplotlib)')
        if processes:
            workers(cmd)
        cmd.add_argument('--warmup', type=float,
                         help='simulated seconds before measuring')
        cmd.add_argument('--measure', type=float,
                         help='simulated seconds measured per trial')
        if not feedback:
            return
        cmd.add_argument('--converge', type=int,
                         help='control intervals (real seconds) the '
                              'feedback managers get to settle')
        cmd.add_argument('--judge', type=int,
                         help='control intervals judged after settling')
        cmd.add_argument('--ufo-option', type=_option, action='append',
                         metavar='NAME=VALUE',
                         help='what-if: override a [controller] option of '
                              'UFO (repeatable), e.g. sf_threshold=0.2')

    def host(cmd, cores=True):
        knobs = cmd.add_argument_group(
            'host and VMs', 'held-out conditions; the budget is cores x '
            'SMT CPUs and follows the host size')
        if cores:
            knobs.add_argument('--cores', type=int,
                               help='physical cores of the host (default '
                                    '8)')
        knobs.add_argument('--smt', choices=sorted(SMT),
                           help='two logical CPUs per core (on, default) '
                                'or one (off)')
        knobs.add_argument(
            '--vcpus', type=_vcpus, action='append', dest='vm_vcpus',
            metavar='N|PROFILE=N',
            help='flavor size of every VM (N) or of one profile\'s VMs '
                 '(repeatable, or comma-separated; default 8). A load '
                 'fraction stays one of the profile\'s max load, '
                 'measured for 8 vCPUs on 8 dedicated CPUs')
        knobs.add_argument(
            '--host-option', type=_host_option, action='append',
            metavar='NAME=VALUE',
            help='set any HostSpec field (repeatable), value as JSON, '
                 'times in simulated seconds (real x %g), e.g. '
                 'smt_slowdown=1.3' % spec_mod.TIME_SCALE)
        knobs.add_argument(
            '--profile-option', type=arguments.profile_option, action='append',
            metavar='PROFILE.FIELD=VALUE',
            help='set a field of one profile (repeatable), value as '
                 'JSON, times in simulated seconds, e.g. '
                 'mysql.lock_share=0.2; fields: %s. A load stays a '
                 'fraction of the profile\'s max load'
                 % ', '.join(profiles_mod.OPTION_FIELDS))

    g = sub.add_parser('grid', help='co-location grids (Fig. 12/13)')
    common(g)
    host(g)
    g.add_argument('--quick', action='store_true',
                   help='coarser grid (4 loads) and shorter trials')
    g.add_argument('--seeds', type=_positive_int, default=3,
                   help='seeds per cell, from --seed up, every manager on '
                        'the same (default: 3); a cell is met when it is '
                        'met on each')
    g.add_argument('--loads', help='comma-separated load fractions of '
                                   'each profile\'s max load')
    which = g.add_mutually_exclusive_group()
    which.add_argument('--apps', type=_apps,
                       help='profiles to pair (default: all three, every '
                            'pair)')
    which.add_argument('--pairs', type=_mixes(2), action='append',
                       metavar='A+B,...',
                       help='pairs to run, e.g. memcached+nginx,mysql+mysql')
    which.add_argument('--mix', type=_mixes(), action='append',
                       metavar='A+B+C,...',
                       help='mixes of any number of VMs, one per profile '
                            'named, e.g. memcached+nginx+mysql: the cells '
                            'are every combination of --loads')
    g.add_argument('--managers', default='default,dyniso,static,ufo,oracle',
                   type=_grid_managers,
                   help='comma-separated managers to run, of: %s. '
                        'oracle-wide is the Oracle over a larger space '
                        '(a VM\'s emulator threads may run on its own '
                        'cores) and costs up to 2^VMs times as much'
                        % ', '.join(registry.MANAGERS))
    g.add_argument('--keep-from', metavar='GRID.json',
                   help='a grid.json of an earlier run of the same grid: '
                        'its results of the managers not run here are '
                        'kept (not UFO\'s; for managers whose code did not '
                        'change since), so UFO alone can be run again')
    g.set_defaults(func=_grid, usage=g)

    m = sub.add_parser('mal', help='maximum aggregated load per CPU count')
    common(m, processes=False)
    m.add_argument('--grid', default='ufo-sim-out/grid.json',
                   help='a grid.json written by "ufo-sim grid"')
    m.set_defaults(func=_mal, usage=m)

    d = sub.add_parser('dynamic', help='load changes, nothing learned '
                                       '(Fig. 14)')
    common(d)
    host(d)
    d.add_argument('--scale', type=_positive, default=1.0,
                   help='stretch (>1) or shrink (<1) the 270 s timeline')
    d.add_argument('--load-scale', type=_positive, default=1.0,
                   help='multiply every VM\'s load pattern by this')
    d.add_argument('--managers', default='default,dyniso,ufo',
                   help='comma-separated managers to run')
    d.set_defaults(func=_dynamic, usage=d)

    s = sub.add_parser('dynamic-set', help='UFO on many dynamic runs '
                                           '(seeds, loads, host sizes), '
                                           'summed; optionally paired with '
                                           'a baseline set')
    common(s, seed_and_plots=False)
    host(s, cores=False)
    s.add_argument('--run', type=_run_triple, action='append',
                   metavar='SEED,LOAD_SCALE,CORES',
                   help='one run (repeatable; default: the sixteen of the '
                        'held-out protocol in sim-results)')
    s.add_argument('--scale', type=_positive, default=1.0,
                   help='stretch (>1) or shrink (<1) the 270 s timeline')
    s.add_argument('--against', metavar='DYNAMIC-SET.JSON',
                   help='a baseline set of the same runs to compare with, '
                        'run by run and load step by load step')
    s.set_defaults(func=_dynamic_set, usage=s)

    f = sub.add_parser('dynamic-diff', help='two dynamic-set.json files of '
                                            'the same runs, paired per '
                                            'load step')
    f.add_argument('base', help='the baseline dynamic-set.json')
    f.add_argument('new', help='the dynamic-set.json judged against it')
    f.set_defaults(func=_dynamic_diff, usage=f)

    gs = sub.add_parser('grid-set', help='the held-out grid protocol (or '
                                         'any of its grids by name), '
                                         'optionally paired with a '
                                         'baseline set')
    gs.add_argument('--out', default='ufo-sim-out',
                    help='directory for grid-set.json and each grid\'s '
                         'NAME/grid.json')
    workers(gs, timeout=600.0)
    gs.add_argument('--ufo-option', type=_option, action='append',
                    metavar='NAME=VALUE',
                    help='what-if: override a [controller] option of UFO '
                         '(repeatable); the grids\' own settings are the '
                         'protocol\'s')
    gs.add_argument('--run', type=_set_runs, action='append',
                    metavar='NAME,...',
                    help='grids to run, by name (repeatable; default: the '
                         'held-out ones, H1 to H9). Names: %s' % ', '.join(
                             _protocol_names()))
    gs.add_argument('--from-grid', type=_saved_grid, action='append',
                    metavar='NAME=GRID.json',
                    help='take grid NAME from a grid.json of an earlier run '
                         '(repeatable; checked to be that grid, with the '
                         'same UFO options); with only these, nothing is '
                         'simulated')
    gs.add_argument('--managers', default='ufo,oracle',
                    type=_grid_managers,
                    help='comma-separated managers (default ufo,oracle)')
    gs.add_argument('--oracle-from', metavar='GRID-SET.JSON',
                    help="a saved set whose Oracle results are reused for "
                         "the same grids (the Oracle does not depend on "
                         "UFO's options)")
    gs.add_argument('--against', metavar='GRID-SET.JSON',
                    help='a baseline set to compare with, cell by cell, '
                         'for the grids both hold')
    gs.set_defaults(func=_grid_set, usage=gs)

    c = sub.add_parser('decompose', help='vCPU-only, emulator-only, '
                                         'combined (Fig. 15)')
    common(c)
    c.add_argument('--apps', default='memcached,nginx,mysql')
    c.add_argument('--cpus', default='4,8,12,16',
                   help='host CPU counts to find the max load at')
    c.add_argument('--vcpus', type=int, default=16,
                   help='flavor size (the paper uses 16)')
    c.set_defaults(func=_decompose, usage=c)

    a = sub.add_parser('allocation', help='fixed allocations of one cell, '
                                          'as the Oracle judges them')
    common(a, processes=False, feedback=False)
    host(a)
    a.add_argument('--cell', type=_cell, required=True,
                   metavar='PROFILE@LOAD+...',
                   help='the VMs and their loads in %% of max load, e.g. '
                        'nginx@50+mysql@20')
    a.add_argument('allocations', type=_allocation_arg, nargs='+',
                   metavar='CORES,.../EMULATOR',
                   help='cores of each VM\'s pool, then of the shared '
                        'emulator pool (0: each VM\'s emulator threads on '
                        'its own cores), e.g. 2,1/2 3,1/2')
    a.set_defaults(func=_allocation, usage=a)

    e = sub.add_parser('edge', help="the Oracle's allocations of a saved "
                                    "grid run, read with the controller's "
                                    'rules')
    e.add_argument('grid', metavar='GRID.json',
                   help='grid.json of a run with the Oracle; its settings '
                        '(seed, host, flavors, UFO options) are reused')
    e.add_argument('--out', default='ufo-sim-out',
                   help='directory for edge.json')
    workers(e, timeout=600.0)
    e.set_defaults(func=_edge, usage=e)

    b = sub.add_parser('be-soak', help='BE guests in the idle pool or '
                                       'soaking every core (SCHED_IDLE)')
    common(b)
    host(b)
    b.add_argument('--quick', action='store_true',
                   help='loads %s only, shorter settling (a few minutes '
                        'on 2 cores)' % ','.join('%g' % x for x in
                                                 (0.2, 0.5)))
    b.add_argument('--loads', help='comma-separated load fractions '
                                   '(default: the quick grid\'s)')
    b.add_argument('--pairs', type=_mixes(2), action='append',
                   metavar='A+B,...',
                   help='LC pairs to run (default: all of the grid\'s)')
    b.set_defaults(func=_be_soak, usage=b)

    d = sub.add_parser('demo', help='ufo-demo\'s scenario without and '
                                    'with the agent')
    common(d)
    host(d)
    d.set_defaults(func=_demo, usage=d)
    cluster_cmd.add_parser(sub)
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    arguments.use_workers(args)
    try:
        return args.func(args)
    except UsageError as exc:
        args.usage.error(str(exc))


if __name__ == '__main__':
    sys.exit(main())
