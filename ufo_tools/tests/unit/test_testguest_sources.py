"""The test guest's build script and sources are found outside a checkout."""

import configparser
import os

import pytest

from ufo_tools import testguest


def _sources(path):
    (path / 'tools').mkdir(parents=True)
    (path / 'tools' / 'build-test-guest.sh').write_text('#!/bin/bash\n')
    (path / 'guest_image').mkdir()
    return str(path)


@pytest.fixture
def nowhere(tmp_path, monkeypatch):
    """No checkout next to the package, no installed data files."""
    monkeypatch.delenv('UFO_SOURCE_DIR', raising=False)
    monkeypatch.setattr(testguest, 'CHECKOUT', str(tmp_path / 'site'))
    monkeypatch.setattr(testguest, '_installed_data_dirs',
                        lambda: [str(tmp_path / 'share' / 'ufo-nova')])
    return tmp_path


def test_checkout_is_found(monkeypatch):
    monkeypatch.delenv('UFO_SOURCE_DIR', raising=False)
    top = testguest.source_dir()
    assert os.path.isfile(os.path.join(top, 'tools', 'build-test-guest.sh'))
    assert os.path.isfile(os.path.join(top, 'guest_image', 'ufo-guest',
                                       'ufo_guest.c'))


def test_environment_variable_comes_first(nowhere, monkeypatch):
    checkout = _sources(nowhere / 'checkout')
    monkeypatch.setenv('UFO_SOURCE_DIR', checkout)
    assert testguest.source_dir() == checkout


def test_wrong_environment_variable_is_an_error(nowhere, monkeypatch):
    _sources(nowhere / 'share' / 'ufo-nova')
    monkeypatch.setenv('UFO_SOURCE_DIR', str(nowhere / 'empty'))
    with pytest.raises(testguest.SourcesNotFound, match='UFO_SOURCE_DIR='):
        testguest.source_dir()


def test_installed_data_files_are_found(nowhere):
    installed = _sources(nowhere / 'share' / 'ufo-nova')
    assert testguest.source_dir() == installed


def test_nothing_found_names_where_it_looked(nowhere):
    with pytest.raises(testguest.SourcesNotFound) as err:
        testguest.source_dir()
    message = str(err.value)
    assert str(nowhere / 'site') in message
    assert str(nowhere / 'share' / 'ufo-nova') in message
    assert 'UFO_SOURCE_DIR' in message


def test_installed_data_dirs_include_the_prefix():
    dirs = testguest._installed_data_dirs()
    assert any(d.endswith(os.path.join('share', 'ufo-nova')) for d in dirs)


def test_setup_cfg_installs_what_the_build_script_reads():
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(testguest.CHECKOUT, 'setup.cfg'))
    data = dict(line.split(' = ', 1) for line in
                cfg['files']['data_files'].strip().splitlines())
    assert data['share/ufo-nova/tools'].split() == [
        'tools/build-test-guest.sh', 'tools/start-libvirtd.sh']
    assert data['share/ufo-nova/guest_image'] == 'guest_image/*'
