"""The README's main job, shortened: ufo-demo end to end.

Runs the real ``ufo-demo`` (three guests, the real ufo-agent) with short
phases and checks what it leaves: the plot, a summary of every phase, the
guests given back with every vCPU online, and no guest left behind.
"""

import json
import subprocess
import sys

from ufo_tools import testguest


def _domains():
    out = subprocess.run(['virsh', '-c', testguest.LIBVIRT_URI, 'list',
                          '--all', '--name'], check=True,
                         capture_output=True, text=True).stdout
    return {line.strip() for line in out.splitlines() if line.strip()}


def test_demo_runs_end_to_end(guest_artifacts, tmp_path):
    before = _domains()
    out = tmp_path / 'out'
    proc = subprocess.run(
        [sys.executable, '-m', 'ufo_tools.demo.run', '--out', str(out),
         '--phase-seconds', '30', '--plain'],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (out / 'ufo-demo.png').stat().st_size > 10000
    summary = json.loads((out / 'summary.json').read_text())
    assert [p['phase'] for p in summary['phases']] == [
        'a-busy', 'both-busy', 'b-busy', 'both-light']
    assert summary['agent_exit'] == 0
    assert summary['restored_online_cpus'] == {
        'idle': [0, 1], 'lc-a': [0, 1], 'lc-b': [0, 1]}
    rows = json.loads((out / 'timeline.json').read_text())
    a_busy = [r for r in rows if r['phase'] == 'a-busy']
    # The busy guest gets both cores while the others are parked.
    assert any(r['vms']['lc-a']['cores'] == 2 and
               r['vms']['lc-a']['online_vcpus'] == 2 and
               r['vms']['lc-b']['mode'] == 'idle' for r in a_busy)
    assert all(r['vms']['idle']['cores'] == 0 for r in rows[10:])
    assert 'UFO demo: ' in (out / 'summary.txt').read_text()
    assert _domains() == before
