"""The simulator's C core, built on first use.

The event loop (``_core.c``, shipped with the package) is a C extension.
It is not built at install time, so that installing ufo-nova never needs
a compiler: the first :class:`~ufo_sim.engine.SimHost` builds it with the
system C compiler into a per-user cache, and later runs load it from
there. Where it is looked for, in order:

1. an extension module built in place beside ``_core.c`` (``python
   setup.py build_ext --inplace``, or a distribution's build), unless it
   is older than ``_core.c``;
2. ``_core-<key><EXT_SUFFIX>`` in ``$UFO_SIM_BUILD_DIR``, else
   ``$XDG_CACHE_HOME/ufo-sim``, else ``~/.cache/ufo-sim``; the key hashes
   the source, the Python ABI and the compiler command, so a changed source
   or another Python builds anew. Builds take a file lock and rename the
   result into place, so parallel worker processes are safe.

``python -m ufo_sim.engine.build`` builds it ahead of time and prints its
path. The compiler is ``$CC``, else Python's (``sysconfig``), with
Python's ``CFLAGS`` (and ``$CFLAGS``), as setuptools would use.
"""

import argparse
import fcntl
import hashlib
import importlib.machinery
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile

MODULE = 'ufo_sim.engine._core'
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, '_core.c')
EXT_SUFFIX = sysconfig.get_config_var('EXT_SUFFIX') or '.so'
EXTRA_CFLAGS = ('-std=c99', '-O2', '-Wall')
LIBS = ('-lm',)


class BuildError(RuntimeError):
    """The C core could not be built."""


def build_dir():
    """Where built cores are cached."""
    explicit = os.environ.get('UFO_SIM_BUILD_DIR')
    if explicit:
        return explicit
    cache = os.environ.get('XDG_CACHE_HOME') or os.path.join(
        os.path.expanduser('~'), '.cache')
    return os.path.join(cache, 'ufo-sim')


def _var(name, default=''):
    return sysconfig.get_config_var(name) or default


def command(source, output):
    """The compiler command line that builds ``source`` into ``output``."""
    compiler = os.environ.get('CC') or _var('CC', 'cc')
    cflags = _var('CFLAGS') + ' ' + os.environ.get('CFLAGS', '')
    return (shlex.split(compiler) + shlex.split(cflags) +
            shlex.split(_var('CCSHARED', '-fPIC')) + ['-shared'] +
            list(EXTRA_CFLAGS) +
            ['-I' + sysconfig.get_paths()['include'], source, '-o', output] +
            list(LIBS))


def _key(code):
    digest = hashlib.sha256(code)
    for part in [EXT_SUFFIX] + command('SOURCE', 'OUTPUT'):
        digest.update(b'\0' + part.encode())
    return digest.hexdigest()[:16]


def _check_toolchain(cmd):
    if shutil.which(cmd[0]) is None:
        raise BuildError(
            'ufo_sim builds its C core on first use and needs a C compiler, '
            'but %r was not found. Install one (Debian/Ubuntu: apt-get '
            'install gcc python3-dev) or set CC.' % cmd[0])
    include = sysconfig.get_paths()['include']
    if not os.path.exists(os.path.join(include, 'Python.h')):
        raise BuildError(
            'ufo_sim builds its C core on first use and needs the Python '
            'headers, but %s is missing. Install them (Debian/Ubuntu: '
            'apt-get install python3-dev).' % os.path.join(include,
                                                           'Python.h'))


def _compile(code, path):
    """Compile ``code`` into ``path``; returns the compiler's output."""
    directory = os.path.dirname(path)
    work = tempfile.mkdtemp(prefix='.build-', dir=directory)
    try:
        # Compile the very bytes that were hashed, not a file that may
        # change meanwhile.
        source = os.path.join(work, '_core.c')
        with open(source, 'wb') as f:
            f.write(code)
        output = os.path.join(work, '_core' + EXT_SUFFIX)
        cmd = command(source, output)
        _check_toolchain(cmd)
        done = subprocess.run(cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            raise BuildError('building the ufo_sim C core failed (%s):\n%s'
                             % (shlex.join(cmd), done.stdout))
        os.replace(output, path)
        return done.stdout
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build(source=SOURCE, directory=None, verbose=False):
    """Find or build the core in the cache; returns the module's path."""
    directory = directory or build_dir()
    with open(source, 'rb') as f:
        code = f.read()
    path = os.path.join(directory, '_core-%s%s' % (_key(code), EXT_SUFFIX))
    if os.path.exists(path):
        return path
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, '.lock'), 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(path):
            output = _compile(code, path)
            if verbose and output:
                sys.stderr.write(output)
    return path


def in_place(source=SOURCE):
    """An extension module built beside the source, unless stale; or None."""
    base = os.path.join(os.path.dirname(source), '_core')
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = base + suffix
        if os.path.exists(path) and (
                not os.path.exists(source) or
                os.path.getmtime(path) >= os.path.getmtime(source)):
            return path
    return None


def load(path, name=MODULE):
    """Load the extension module at ``path`` (not added to sys.modules)."""
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def core():
    """The C core module, built on first use."""
    module = sys.modules.get(MODULE)
    if module is None:
        module = load(in_place() or build())
        sys.modules[MODULE] = module
    return module


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m ufo_sim.engine.build',
        description='Build the ufo_sim C core into its cache (%s) and '
                    'print its path.' % build_dir())
    parser.parse_args(argv)
    try:
        path = in_place() or build(verbose=True)
        load(path)
    except BuildError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
