"""What the ``ufo-sim`` commands share: argument types, settings, output.

Each command is a module of :mod:`ufo_sim.commands`; this one holds the
parsers of option values, the option groups several commands take
(:func:`add_common`, :func:`add_host`, :func:`add_workers`), the
:class:`~ufo_sim.managers.cell.Settings` built from them, and the JSON
and figure output.
"""

import argparse
import dataclasses
import json
import math
import os
import sys

from ufo_sim import arguments
from ufo_sim.engine import spec as spec_mod
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import registry
from ufo_sim.managers import scenario
from ufo_sim import profiles as profiles_mod

SMT = {'on': 2, 'off': 1}


class UsageError(Exception):
    """Options that parse but describe a host that cannot be built."""


def host_option(text):
    """``name=value`` of a HostSpec field (spec.parse_option)."""
    try:
        return spec_mod.parse_option(
            text, {f.name for f in dataclasses.fields(spec_mod.HostSpec)})
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def vcpus(text):
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


def mixes(size=None):
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


def apps(text):
    for app in text.split(','):
        if app not in scenario.PROFILES:
            raise argparse.ArgumentTypeError('%r: not one of %s' % (
                app, ', '.join(sorted(scenario.PROFILES))))
    return text


def grid_managers(text):
    for name in text.split(','):
        if name not in registry.MANAGERS:
            raise argparse.ArgumentTypeError('%r: not one of %s' % (
                name, ', '.join(registry.MANAGERS)))
    return text


def positive(text):
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError('%r: must be > 0' % text)
    return value


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError('must be at least 1: %r' % text)
    return value


def settings(args, **quick):
    values = {'seed': getattr(args, 'seed', 1),
              'seeds': getattr(args, 'seeds', 1),
              'ufo_config': tuple(getattr(args, 'ufo_option', None) or ()),
              'qos_target': bool(getattr(args, 'qos_target', False))}
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


def checked(settings, cells, *cores):
    """``settings``, once a host of each cell (and size) builds."""
    try:
        scenario.check(settings, cells)
        for size in cores:
            scenario.fit_cores(settings, size)
    except (TypeError, ValueError) as exc:
        raise UsageError('no host can be built with %s: %s'
                         % (settings.describe(), exc))
    return settings


def floats(text):
    return tuple(float(x) for x in text.split(','))


def clean(value):
    """JSON has no infinity: p99 of a VM that served nothing is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def write_json(path, data):
    with open(path, 'w') as f:
        json.dump(clean(data), f, indent=1, sort_keys=True)
        f.write('\n')


def plots_wanted(args):
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


def finish(args, module, out, name):
    """Figures, JSON and the table of one experiment's output."""
    os.makedirs(args.out, exist_ok=True)
    if plots_wanted(args):
        module.plot(out, args.out)
    write_json(os.path.join(args.out, name + '.json'), out)
    print(module.table(out))
    return 0


def read_grid(path):
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


def read_set(path, kind='dynamic-set.json'):
    """A saved set of runs (``kind`` names the file in errors)."""
    try:
        with open(path) as f:
            out = json.load(f)
    except (OSError, ValueError) as exc:
        raise UsageError('%s: not a %s (%s)' % (path, kind, exc))
    if not isinstance(out, dict) or not isinstance(out.get('runs'), list):
        raise UsageError('%s: not a %s (no runs)' % (path, kind))
    return out


def add_workers(cmd, timeout=300.0):
    arguments.workers(cmd)
    cmd.add_argument('--task-timeout', type=float, default=timeout,
                     help='seconds one simulation task may take '
                     'before it is killed and reported')


def add_common(cmd, processes=True, feedback=True, seed_and_plots=True):
    if seed_and_plots:
        cmd.add_argument('--seed', type=int, default=1,
                         help='base seed; same seed, same results')
    cmd.add_argument('--out', default='ufo-sim-out',
                     help='directory for JSON and PNG files')
    if seed_and_plots:
        cmd.add_argument('--no-plots', action='store_true',
                         help='skip the PNG figures (no matplotlib)')
    if processes:
        add_workers(cmd)
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
    cmd.add_argument('--ufo-option', type=arguments.controller_option,
                     action='append',
                     metavar='NAME=VALUE',
                     help='what-if: override a [controller] option of '
                     'UFO (repeatable), e.g. sf_threshold=0.2')


def add_qos_target(cmd):
    cmd.add_argument('--qos-target', action='store_true',
                     help='run UFO in its QoS-target mode: each guest has '
                          'its profile\'s QoS target and publishes the p99 '
                          'of the requests it completed each second')


def add_host(cmd, cores=True):
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
        '--vcpus', type=vcpus, action='append', dest='vm_vcpus',
        metavar='N|PROFILE=N',
        help='flavor size of every VM (N) or of one profile\'s VMs '
             '(repeatable, or comma-separated; default 8). A load '
             'fraction stays one of the profile\'s max load, '
             'measured for 8 vCPUs on 8 dedicated CPUs')
    knobs.add_argument(
        '--host-option', type=host_option, action='append',
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
