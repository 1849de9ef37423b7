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
    """What breaks the idle rule for guest ``name``; [] if nothing.

    The rule (``ufo_agent.controller.classifier``): a guest is parked
    once its utilization stayed under idle_util for idle_after seconds,
    and a parked guest that gets busy again is woken. So the guest must
    be parked within idle_after (plus tick slack) of its last busy
    sample, and after that hold a core only within idle_after (plus
    slack) of a busy sample: a guest's own housekeeping may wake it.
    """
    slack = IDLE_AFTER + 3
    busy_at = [r['t'] for r in rows if r['vms'][name]['util'] >= IDLE_UTIL]
    parked = [i for i, r in enumerate(rows)
              if r['vms'][name]['mode'] == 'idle']
    if not parked:
        return ['never parked']
    first = parked[0]
    before = [t for t in busy_at if t <= rows[first]['t']]
    quiet_from = before[-1] if before else rows[0]['t']
    faults = []
    if rows[first]['t'] > quiet_from + slack:
        faults.append('parked at row %d, %.1f s after it went quiet'
                      % (first, rows[first]['t'] - quiet_from))
    for i, r in enumerate(rows[first:], first):
        if r['vms'][name]['cores'] == 0:
            continue
        woke = [t for t in busy_at if t <= r['t']]
        if not woke or r['t'] - woke[-1] > slack:
            since = ('%.1f s after its last busy sample' %
                     (r['t'] - woke[-1]) if woke else 'never busy before')
            faults.append('row %d (%s): a core, %s: %s'
                          % (i, r['phase'], since, r['vms'][name]))
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
    # first phase, and holds a core again only when it gets busy.
    assert parking_faults(rows, 'idle') == []
    assert rows[next(i for i, r in enumerate(rows)
                     if r['vms']['idle']['mode'] == 'idle')][
        'phase'] == 'a-busy'
    assert 'UFO demo: ' in (out / 'summary.txt').read_text()
    assert _domains() == before
