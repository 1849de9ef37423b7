"""ufo-bench scheduler runs and prints its RESULT line (not a benchmark)."""

import re
import subprocess
import sys

import testtools

SCRIPT = '''
import argparse, sys
from ufo_tools.bench import scheduler
parser = argparse.ArgumentParser()
scheduler.add_arguments(parser)
sys.exit(scheduler.run(parser.parse_args(sys.argv[1:])))
'''


class TestSchedulerBench(testtools.TestCase):

    def run_bench(self, *args):
        # A process of its own: the benchmark parses Nova's global CONF.
        return subprocess.run(
            [sys.executable, '-c', SCRIPT] + list(args), capture_output=True,
            text=True, timeout=300)

    def test_small_run(self):
        proc = self.run_bench('--hosts', '60', '--repeats', '2',
                              '--overloaded-fraction', '0.5')
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertRegex(proc.stdout, re.compile(
            r'^RESULT hosts=60 ufo_overhead_ratio=-?\d+\.\d+ '
            r'per_host_us=-?\d+\.\d+$', re.M))
        kept = re.search(r'without=(\d+) with=(\d+)', proc.stdout)
        self.assertEqual('60', kept.group(1))
        self.assertLess(int(kept.group(2)), 60)  # overloaded hosts dropped

    def test_bad_arguments(self):
        proc = self.run_bench('--hosts', '1')
        self.assertEqual(2, proc.returncode)
        self.assertIn('--hosts must be >= 2', proc.stderr)
