"""ufo-bench scheduler names the missing package when Nova is absent."""

import argparse
import sys

from ufo_tools.bench import scheduler


def test_missing_nova_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, 'nova', None)  # import nova fails
    monkeypatch.delitem(sys.modules, 'nova.conf', raising=False)
    parser = argparse.ArgumentParser()
    scheduler.add_arguments(parser)
    assert scheduler.run(parser.parse_args(['--hosts', '10'])) == 2
    err = capsys.readouterr().err
    assert '"nova" Python package' in err
    assert 'pip install nova' in err
