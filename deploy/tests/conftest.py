"""What the deployment tests share: this checkout and its wheel."""

import importlib.metadata
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope='session')
def ufo_nova_wheel(tmp_path_factory):
    """The ufo-nova wheel of this checkout, built as an operator does.

    Built from a copy of the tracked files, so that the build leaves
    nothing in the checkout; pbr takes the version the test environment
    installed (there is no git in the copy).
    """
    files = subprocess.run(['git', 'ls-files', '-z'], cwd=REPO, check=True,
                           capture_output=True).stdout.split(b'\0')
    src = tmp_path_factory.mktemp('ufo-nova-src')
    for name in filter(None, files):
        path = REPO / os.fsdecode(name)
        if path.is_file():
            dest = src / os.fsdecode(name)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
    out = tmp_path_factory.mktemp('dist')
    env = dict(os.environ,
               PBR_VERSION=importlib.metadata.version('ufo-nova'))
    subprocess.run([sys.executable, '-m', 'build', '--wheel',
                    '--no-isolation', '--outdir', str(out), str(src)],
                   check=True, env=env, capture_output=True)
    [wheel] = out.glob('ufo_nova-*.whl')
    return wheel
