"""The argparse types both command lines share."""

import argparse

import pytest

from ufo_sim import arguments
from ufo_sim.calibration import __main__ as calibration_main
from ufo_sim import cmd


def test_a_profile_option_is_parsed_by_the_model():
    assert arguments.profile_option('mysql.rounds=6') == ('mysql.rounds', 6)
    with pytest.raises(argparse.ArgumentTypeError) as exc:
        arguments.profile_option('nginx.qos_p99_us=1')
    assert 'PROFILE.FIELD=VALUE' in str(exc.value)


@pytest.mark.parametrize('main, argv', [
    (cmd.main, ['grid', '--no-plots']),
    (calibration_main.main, ['check']),
])
def test_both_command_lines_refuse_a_bad_profile_option_alike(
        capsys, main, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv + ['--profile-option', 'nginx.qos_p99_us=1'])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert 'PROFILE.FIELD=VALUE' in err and 'cache_footprint' in err
