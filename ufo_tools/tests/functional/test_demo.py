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


IDLE_AFTER = 8       # the demo's default --idle-after
IDLE_UTIL = 1.0      # ufo_agent.controller.config idle_util default


def parking_faults(rows, name):
    """What breaks 'parked once quiet, then no core'; [] if none.

    The guest must be parked within idle_after (plus tick slack) of its
    last busy sample and hold no core in any row after that.

    The guest's own boot tail can be busy in the first rows, so the
    deadline counts from its last busy row, not from the demo's start.
    """
    parked = [i for i, r in enumerate(rows)
              if r['vms'][name]['mode'] == 'idle']
    if not parked:
        return ['never parked']
    first = parked[0]
    busy = [i for i, r in enumerate(rows[:first])
            if r['vms'][name]['util'] >= IDLE_UTIL]
    quiet_from = rows[busy[-1]]['t'] if busy else rows[0]['t']
    faults = []
    if rows[first]['t'] > quiet_from + IDLE_AFTER + 3:
        faults.append('parked at row %d, %.1f s after it went quiet'
                      % (first, rows[first]['t'] - quiet_from))
    faults.extend('row %d (%s): %s' % (i, r['phase'], r['vms'][name])
                  for i, r in enumerate(rows[first:], first)
                  if r['vms'][name]['cores'] != 0)
    return faults


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
    # The idle guest is parked once quiet for idle_after, within the
    # first phase, and holds no core from then on.
    assert parking_faults(rows, 'idle') == []
    assert rows[next(i for i, r in enumerate(rows)
                     if r['vms']['idle']['mode'] == 'idle')][
        'phase'] == 'a-busy'
    assert 'UFO demo: ' in (out / 'summary.txt').read_text()
    assert _domains() == before
