"""The C core is built on first use into a cache keyed by its source."""

import os
import subprocess
import sys

import pytest

from ufo_sim.engine import build

TINY = """#define PY_SSIZE_T_CLEAN
#include <Python.h>
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_core", NULL, -1};
PyMODINIT_FUNC PyInit__core(void)
{
    PyObject *m = PyModule_Create(&mod);
    if (m)
        PyModule_AddIntConstant(m, "VALUE", %d);
    return m;
}
"""


def _tiny(tmp_path, value):
    source = tmp_path / 'src' / '_core.c'
    source.parent.mkdir(exist_ok=True)
    source.write_text(TINY % value)
    return str(source)


def _built(directory):
    return sorted(name for name in os.listdir(directory)
                  if name.startswith('_core-'))


def test_builds_the_engine_into_the_given_directory(tmp_path):
    path = build.build(directory=str(tmp_path))
    assert os.path.dirname(path) == str(tmp_path)
    assert path.endswith(build.EXT_SUFFIX)
    core = build.load(path)
    assert hasattr(core, 'Host')
    # Found again without compiling.
    assert build.build(directory=str(tmp_path)) == path
    assert _built(tmp_path) == [os.path.basename(path)]
    assert sorted(os.listdir(tmp_path)) == ['.lock', os.path.basename(path)]


def test_cached_core_is_reused_without_a_compiler(tmp_path, monkeypatch):
    source = _tiny(tmp_path, 1)
    path = build.build(source, str(tmp_path / 'cache'))

    def no_compiler(*args, **kwargs):
        raise AssertionError('compiled again')

    monkeypatch.setattr(build.subprocess, 'run', no_compiler)
    assert build.build(source, str(tmp_path / 'cache')) == path


def test_changed_source_builds_anew(tmp_path):
    cache = str(tmp_path / 'cache')
    source = _tiny(tmp_path, 1)
    first = build.build(source, cache)
    _tiny(tmp_path, 2)
    second = build.build(source, cache)
    assert second != first
    assert build.load(first, 'ufo_build_test._core').VALUE == 1
    assert build.load(second, 'ufo_build_test._core').VALUE == 2


def test_parallel_builds_agree(tmp_path):
    cache = str(tmp_path / 'cache')
    source = _tiny(tmp_path, 3)
    code = ('import sys; from ufo_sim.engine import build; '
            'print(build.build(sys.argv[1], sys.argv[2]))')
    procs = [subprocess.Popen([sys.executable, '-c', code, source, cache],
                              stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    paths = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(paths) == 1
    assert sorted(os.listdir(cache)) == ['.lock'] + _built(cache)
    assert len(_built(cache)) == 1


def test_missing_compiler_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv('CC', '/nonexistent/cc')
    with pytest.raises(build.BuildError) as err:
        build.build(_tiny(tmp_path, 1), str(tmp_path / 'cache'))
    assert 'needs a C compiler' in str(err.value)
    assert 'apt-get install gcc python3-dev' in str(err.value)
    assert os.listdir(tmp_path / 'cache') == ['.lock']


def test_compile_error_leaves_nothing_behind(tmp_path):
    source = tmp_path / '_core.c'
    source.write_text('this is not C\n')
    with pytest.raises(build.BuildError) as err:
        build.build(str(source), str(tmp_path / 'cache'))
    assert 'error' in str(err.value)
    assert os.listdir(tmp_path / 'cache') == ['.lock']


def test_build_dir_follows_the_environment(monkeypatch):
    monkeypatch.setenv('UFO_SIM_BUILD_DIR', '/x/build')
    monkeypatch.setenv('XDG_CACHE_HOME', '/x/cache')
    monkeypatch.setenv('HOME', '/x/home')
    assert build.build_dir() == '/x/build'
    monkeypatch.delenv('UFO_SIM_BUILD_DIR')
    assert build.build_dir() == '/x/cache/ufo-sim'
    monkeypatch.delenv('XDG_CACHE_HOME')
    assert build.build_dir() == '/x/home/.cache/ufo-sim'


def test_in_place_build_is_used_unless_older_than_the_source(tmp_path):
    source = tmp_path / '_core.c'
    source.write_text('/* source */\n')
    assert build.in_place(str(source)) is None
    module = tmp_path / ('_core' + build.EXT_SUFFIX)
    module.write_bytes(b'')
    os.utime(source, (1000, 1000))
    os.utime(module, (2000, 2000))
    assert build.in_place(str(source)) == str(module)
    os.utime(source, (3000, 3000))
    assert build.in_place(str(source)) is None


def test_engine_source_ships_with_the_package():
    assert os.path.isfile(build.SOURCE)
