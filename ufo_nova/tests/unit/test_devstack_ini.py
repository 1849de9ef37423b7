"""The test stand-in for devstack's ini helpers behaves as devstack's.

Each case is what devstack's inc/ini-config does to the same file (its
functions' comments, and the result of their sed scripts).
"""

import contextlib
import io

from ufo_nova.tests.devstack import ini


def _get(function, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        function(*args)
    return out.getvalue().rstrip('\n')


def test_iniset_creates_file_section_and_option(tmp_path):
    path = str(tmp_path / 'new.conf')
    ini.iniset(path, 'filter_scheduler', 'enabled_filters', 'A,B')
    ini.iniset(path, 'filter_scheduler', 'workers', '2')
    ini.iniset(path, 'filter_scheduler', 'enabled_filters', 'A,B,C')
    ini.main(['iniset', '-sudo', path, 'ufo', 'x', 'a   b'])
    # A new option goes right after the header; a new section at the end,
    # after an empty line; values fold white space as "echo $value".
    assert open(path).read() == (
        '\n[filter_scheduler]\nworkers = 2\nenabled_filters = A,B,C\n'
        '\n[ufo]\nx = a b\n')


def test_iniset_keeps_the_spacing_of_a_replaced_line(tmp_path):
    path = tmp_path / 'a.conf'
    path.write_text('[DEFAULT]\ndebug=False\n[other]\ndebug = 1\n')
    ini.iniset(str(path), 'DEFAULT', 'debug', 'True')
    assert path.read_text() == '[DEFAULT]\ndebug=True\n[other]\ndebug = 1\n'


def test_iniadd_appends_lines_in_order(tmp_path):
    path = tmp_path / 'n.conf'
    path.write_text('[filter_scheduler]\nenabled_filters = A\n'
                    'available_filters = one\n[ufo]\n')
    ini.iniadd(str(path), 'filter_scheduler', 'available_filters', 'two',
               'three')
    assert path.read_text() == (
        '[filter_scheduler]\navailable_filters = one\n'
        'available_filters = two\navailable_filters = three\n'
        'enabled_filters = A\n[ufo]\n')
    assert _get(ini.iniget_multiline, str(path), 'filter_scheduler',
                'available_filters') == 'one two three'
    # iniget of a multi-line option: everything after the first "=".
    assert _get(ini.iniget, str(path), 'filter_scheduler',
                'available_filters') == (
        'one available_filters = two available_filters = three')


def test_iniset_multiline_replaces_and_inidelete_removes(tmp_path):
    path = tmp_path / 'n.conf'
    path.write_text('[s]\no = 1\no = 2\np = x\n')
    ini.iniset_multiline(str(path), 's', 'o', '3')
    assert path.read_text() == '[s]\no = 3\np = x\n'
    ini.inidelete(str(path), 's', 'o')
    assert path.read_text() == '[s]\np = x\n'
    assert ini.ini_has_option(str(path), 's', 'p') == 0
    assert ini.ini_has_option(str(path), 's', 'o') == 1
    assert _get(ini.iniget, str(path), 's', 'missing') == ''
