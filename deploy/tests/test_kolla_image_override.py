"""Kolla's own kolla-build renders deploy/kolla/template-overrides.j2.

``kolla-build --template-only`` renders every image's Dockerfile.j2 with
kolla's Jinja environment (its macros, filters and the users of its
config) and the override as a child template, exactly as a real build
does before it calls the container engine; kolla-build also reads the
shipped kolla-build.conf, whose additions sections it checks against its
source options.
"""

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO

KOLLA = REPO / 'deploy' / 'kolla'
INSTALL = ('RUN python3 -m pip --no-cache-dir install --upgrade '
           '-c /requirements/upper-constraints.txt '
           '/additions/ufo-nova/ufo_nova-*.whl && rm -rf /additions')


def instructions(dockerfile):
    """The Dockerfile's instructions, continuation lines joined."""
    text = re.sub(r'\\\n\s*', ' ', dockerfile.read_text())
    return [' '.join(line.split()) for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith('#')]


@pytest.fixture(scope='module')
def rendered(tmp_path_factory):
    work = tmp_path_factory.mktemp('kolla')
    kolla_build = os.path.join(os.path.dirname(sys.executable),
                               'kolla-build')
    proc = subprocess.run(
        [kolla_build, '--config-file', str(KOLLA / 'kolla-build.conf'),
         '--template-only', '--work-dir', str(work),
         '--template-override', str(KOLLA / 'template-overrides.j2'),
         '^nova-scheduler$', '^nova-api$', '^nova-base$'],
        capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return work / 'docker' / 'nova'


@pytest.mark.parametrize('image,after', [
    # What each parent template puts after its footer block.
    ('nova-scheduler', ['USER nova']),
    ('nova-api', []),
])
def test_the_image_installs_the_added_wheel_last(rendered, image, after):
    steps = instructions(rendered / image / 'Dockerfile')
    assert steps[0].startswith('FROM ') and '/nova-base:' in steps[0]
    # The footer: after everything of the image's own.
    assert steps[-2 - len(after):] == [
        'ADD additions-archive /', INSTALL] + after


def test_no_other_image_changes_and_nothing_comes_by_name(rendered):
    assert not any('ufo' in step for step in
                   instructions(rendered / 'nova-base' / 'Dockerfile'))
    # ufo-nova is not on PyPI: only the wheel given to the build.
    for image in ('nova-scheduler', 'nova-api'):
        for step in instructions(rendered / image / 'Dockerfile'):
            assert not re.search(r'install\b.*\sufo[-_]nova\b(?!-\*\.whl)',
                                 step.replace('/additions/ufo-nova/', '')), (
                step)
