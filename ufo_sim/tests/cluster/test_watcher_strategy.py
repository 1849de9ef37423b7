"""The Watcher strategy's tests, in an interpreter of their own.

Watcher and Nova both register ``[api] max_limit`` on oslo.config's global
CONF, differently, so they cannot be imported in one process (they never
are in a cloud: watcher-decision-engine and nova-scheduler are separate
services). The cases are in ``watcher_strategy_cases.py``, which this
directory's default collection skips; this test runs them with pytest in
a child interpreter and fails with their report.
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
CASES = os.path.join(HERE, 'watcher_strategy_cases.py')


def test_watcher_strategy_cases_pass_in_their_own_process():
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        [ROOT] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep)
                  if p])
    out = subprocess.run(
        [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
         '-p', 'no:xdist', '-W', 'ignore', '-rfE', CASES],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    report = out.stdout[-6000:] + out.stderr[-2000:]
    assert out.returncode == 0, report
    assert ' passed' in out.stdout and 'skipped' not in out.stdout, report
