"""The ``results`` command: regenerate the docs' committed results.

Every JSON, PNG and text file under ``doc/source/_static/sim`` and
``doc/source/_static/demo`` comes from one of the steps of :data:`STEPS`:
a command run into a scratch directory, then the files it wrote copied
under the names the pages cite. ``ufo-sim results --dry-run`` lists the
commands and copies without running anything.
"""

import argparse
import dataclasses
import os
import shlex
import shutil
import subprocess
import sys

PAIRS = ('memcached+memcached', 'memcached+nginx', 'memcached+mysql',
         'nginx+nginx', 'nginx+mysql', 'mysql+mysql')
APPS = ('memcached', 'nginx', 'mysql')


@dataclasses.dataclass(frozen=True)
class Step:
    """One command and the files it writes, as the doc tree names them.

    ``argv`` starts with ``ufo-sim``, ``calibration`` (``python -m
    ufo_sim.calibration``) or a path under the repository; ``{scratch}``
    is the step's own scratch directory, ``{root}`` the scratch root.
    ``copies`` pairs a file of the scratch directory with its path under
    ``doc/source/_static``. ``needs`` says what the step needs beyond
    the ``sim`` and ``plot`` extras.
    """

    name: str
    argv: tuple
    copies: tuple
    needs: str = ''
    ok_status: tuple = (0,)


def _grid_copies(prefix, pairs):
    return tuple(('grid-%s.png' % p, 'sim/grid-%s-%s.png' % (prefix, p))
                 for p in pairs)


STEPS = (
    Step('calibration-figures',
         ('calibration', 'figures', '--out', '{scratch}'),
         (('calibration.json', 'sim/calibration.json'),)
         + tuple((f, 'sim/' + f) for f in (
             'sf_vs_load.png', 'isolation.png', 'emulator.png', 'be.png'))),
    # check exits 1 when a row misses its interval: that is a result too.
    Step('calibration-check',
         ('calibration', 'check', '--processes', '2', '--out', '{scratch}'),
         (('calibration-check.json', 'sim/calibration-check.json'),
          ('fig12.png', 'sim/fig12.png')),
         ok_status=(0, 1)),
    Step('calibration-ablation',
         ('calibration', 'ablation', '--processes', '2', '--out',
          '{scratch}'),
         (('mechanisms.json', 'sim/mechanisms.json'),
          ('mechanisms.png', 'sim/mechanisms.png'))),
    Step('grid-quick',
         ('ufo-sim', 'grid', '--quick', '--processes', '2', '--out',
          '{scratch}'),
         (('grid.json', 'sim/grid-quick.json'),)
         + _grid_copies('quick', PAIRS)),
    Step('mal-quick',
         ('ufo-sim', 'mal', '--grid', '{root}/grid-quick/grid.json',
          '--out', '{scratch}'),
         (('mal.json', 'sim/mal-quick.json'),)
         + tuple(('mal-%s.png' % p, 'sim/quick-mal-%s.png' % p)
                 for p in PAIRS)),
    Step('grid-full-memcached',
         ('ufo-sim', 'grid', '--apps', 'memcached', '--processes', '2',
          '--out', '{scratch}'),
         (('grid.json', 'sim/grid-full-memcached.json'),)
         + _grid_copies('full', ('memcached+memcached',))),
    Step('mal-full-memcached',
         ('ufo-sim', 'mal', '--grid', '{root}/grid-full-memcached/grid.json',
          '--out', '{scratch}'),
         (('mal.json', 'sim/mal-full-memcached.json'),
          ('mal-memcached+memcached.png',
           'sim/full-mal-memcached+memcached.png'))),
    Step('dynamic',
         ('ufo-sim', 'dynamic', '--processes', '2', '--out', '{scratch}'),
         (('dynamic.json', 'sim/dynamic.json'),)
         + tuple(('dynamic-%s-%s.png' % (a, k), 'sim/dynamic-%s-%s.png'
                  % (a, k)) for a in APPS for k in ('cpus', 'p99'))),
    Step('decompose',
         ('ufo-sim', 'decompose', '--processes', '2', '--out', '{scratch}'),
         (('decompose.json', 'sim/decompose.json'),)
         + tuple(('decompose-%s.png' % a, 'sim/decompose-%s.png' % a)
                 for a in APPS)),
    # The held-out set takes the two grids above rather than run them again.
    Step('grid-set',
         ('ufo-sim', 'grid-set', '--processes', '2', '--out', '{scratch}',
          '--from-grid', 'quick={root}/grid-quick/grid.json',
          '--from-grid', 'full-memcached={root}/grid-full-memcached/'
          'grid.json'),
         (('grid-set.json', 'sim/grid-set.json'),)),
    Step('dynamic-set',
         ('ufo-sim', 'dynamic-set', '--processes', '2', '--out',
          '{scratch}'),
         (('dynamic-set.json', 'sim/dynamic-set.json'),)),
    Step('demo',
         ('tools/demo.sh', '--plain', '--out', '{scratch}'),
         (('ufo-demo.png', 'demo/ufo-demo.png'),
          ('summary.txt', 'demo/summary.txt')),
         needs='libvirtd, QEMU and root (boots three guests; agent page, '
               '"The demo")'),
)

BY_NAME = {s.name: s for s in STEPS}


def _names(text):
    names = [n for n in text.split(',') if n]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise argparse.ArgumentTypeError(
            'unknown step(s) %s; the steps: %s'
            % (', '.join(unknown), ', '.join(BY_NAME)))
    return names


def add_parser(subparsers):
    """Add ``results`` to ``ufo-sim``'s subcommands."""
    cmd = subparsers.add_parser(
        'results', help="regenerate the docs' committed result files")
    cmd.add_argument('--dry-run', action='store_true',
                     help='list each command and copy; run nothing')
    cmd.add_argument('--root', default='.',
                     help='the repository (default: the current '
                          'directory); results go to its '
                          'doc/source/_static')
    cmd.add_argument('--scratch', default='ufo-sim-results',
                     help='directory for the commands\' own output, one '
                          'subdirectory a step (default: ufo-sim-results)')
    which = cmd.add_mutually_exclusive_group()
    which.add_argument('--only', type=_names, metavar='STEP,...',
                       help='run these steps only, of: %s'
                            % ', '.join(BY_NAME))
    which.add_argument('--skip', type=_names, metavar='STEP,...',
                       help='run every step but these, e.g. demo')
    cmd.set_defaults(func=run, usage=cmd)
    return cmd


def selected(only=None, skip=None):
    """The steps to run, in :data:`STEPS`' order."""
    return [s for s in STEPS
            if (only is None or s.name in only)
            and (skip is None or s.name not in skip)]


def command(step, scratch_root):
    """The argv to run for ``step``, with its scratch paths filled in."""
    scratch = os.path.join(scratch_root, step.name)
    argv = [a.format(scratch=scratch, root=scratch_root) for a in step.argv]
    if argv[0] == 'ufo-sim':
        return [sys.executable, '-m', 'ufo_sim.cmd'] + argv[1:]
    if argv[0] == 'calibration':
        return [sys.executable, '-m', 'ufo_sim.calibration'] + argv[1:]
    return argv


def shown(step, scratch_root):
    """The step's command as a reader would type it."""
    argv = [a.format(scratch=os.path.join(scratch_root, step.name),
                     root=scratch_root) for a in step.argv]
    if argv[0] == 'calibration':
        argv = ['python', '-m', 'ufo_sim.calibration'] + argv[1:]
    return shlex.join(argv)


def plan_lines(steps, scratch_root, static):
    """What :func:`run` would do, one line a command or copy."""
    lines = []
    for step in steps:
        lines.append('%s: %s' % (step.name, shown(step, scratch_root)))
        if step.needs:
            lines.append('  needs %s' % step.needs)
        for src, dest in step.copies:
            lines.append('  copy %s -> %s' % (
                os.path.join(scratch_root, step.name, src),
                os.path.join(static, dest)))
    return lines


def run(args):
    steps = selected(args.only, args.skip)
    static = os.path.join(args.root, 'doc', 'source', '_static')
    scratch_root = os.path.abspath(args.scratch)
    if args.dry_run:
        print('\n'.join(plan_lines(steps, scratch_root, static)))
        return 0
    for step in steps:
        scratch = os.path.join(scratch_root, step.name)
        os.makedirs(scratch, exist_ok=True)
        print('%s: %s' % (step.name, shown(step, scratch_root)), flush=True)
        status = subprocess.call(command(step, scratch_root), cwd=args.root)
        if status not in step.ok_status:
            sys.stderr.write('ufo-sim results: %s exited %d; stopping (the '
                             'doc tree has the steps before it)\n'
                             % (step.name, status))
            return 1
        for src, dest in step.copies:
            shutil.copyfile(os.path.join(scratch, src),
                            os.path.join(static, dest))
    return 0
