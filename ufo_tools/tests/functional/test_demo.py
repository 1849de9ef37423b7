"""The README's main job: ufo-demo end to end, both runs.

Runs the real ``ufo-demo`` (an LC, a BE and an idle guest pinned as Nova
pins shared-policy guests, first without ufo-agent, then with the real
agent) with the demo's phases and checks what it leaves: the plot, both
runs' summaries, the guests given back with every vCPU online, Nova's
pins and normal priority, and no guest left behind. While the run
without the agent goes on, the test looks for itself (libvirt and /proc,
not the demo's own record): no agent process, no agent files, and every
guest with the pins Nova's definition gives; during the agent's run it
must see the agent change them. It reads libvirt, never the agent's
/status, so the moment before the agent's first tick needs no special
case.
"""

import json
import pathlib
import queue
import subprocess
import sys
import threading
import time

import libvirt

from ufo_agent.hypervisor.domain import NOVA_NS
from ufo_tools.demo import scenario
from ufo_tools import e2e as harness
from ufo_tools import testguest

PHASES = [p.name for p in scenario.PHASES]
# Shorter than the demo's own 30 s, to keep CI within its time: a quiet
# guest parks idle_after (8 s) after its last sample above idle_util and
# its housekeeping now and then lifts a sample over that, so a phase
# still leaves room for the clock to restart once.
PHASE_SECONDS = 20.0
RUN1 = '=== Run 1 of 2: without ufo-agent'
RUN2 = '=== Run 2 of 2: with ufo-agent'


def _domains():
    """The names of the demo's domains, defined or running.

    Known by their Nova metadata (flavor ``demo.N``): other tests may run
    guests of their own on the same host meanwhile.
    """
    conn = libvirt.open(testguest.LIBVIRT_URI)
    try:
        return {dom.name() for dom in conn.listAllDomains(0)
                if _is_demo(dom)}
    finally:
        conn.close()


def _is_demo(dom):
    try:
        meta = dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, NOVA_NS)
    except libvirt.libvirtError:
        return False        # no Nova metadata, or gone meanwhile
    return '<flavor name="demo.' in meta


IDLE_AFTER = scenario.IDLE_AFTER
IDLE_UTIL = scenario.IDLE_UTIL


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


def agent_processes(marker):
    """Pids of processes whose command line names ``marker``."""
    found = []
    for cmdline in pathlib.Path('/proc').glob('[0-9]*/cmdline'):
        try:
            text = cmdline.read_bytes().replace(b'\0', b' ').decode()
        except OSError:
            continue
        if 'ufo_agent.cmd.agent' in text and marker in text:
            found.append(cmdline.parent.name)
    return found


class Watcher:
    """Samples the demo's guests as libvirt shows them."""

    def __init__(self, before):
        self.before = before
        self.conn = libvirt.open(testguest.LIBVIRT_URI)
        self.shared = frozenset(harness.host_online_cpus())

    def guests(self):
        doms = []
        for dom in self.conn.listAllDomains(
                libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
            if dom.name() not in self.before and _is_demo(dom):
                doms.append(dom)
        return doms

    def sample(self):
        """{domain name: (vCPU pin sets, emulator pins, agent channel)}."""
        out = {}
        for dom in self.guests():
            try:
                vcpus = {frozenset(i for i, on in enumerate(m) if on)
                         for m in dom.vcpuPinInfo(
                             libvirt.VIR_DOMAIN_AFFECT_LIVE)}
                emulator = frozenset(i for i, on in enumerate(
                    dom.emulatorPinInfo(libvirt.VIR_DOMAIN_AFFECT_LIVE))
                    if on)
                channel = ("<shmem name='ufo-%s'" % dom.UUIDString()
                           in dom.XMLDesc(0))
            except libvirt.libvirtError:
                continue    # destroyed meanwhile
            out[dom.name()] = (vcpus, emulator, channel)
        return out

    def as_nova_wrote(self, pins):
        vcpus, emulator, channel = pins
        return (vcpus == {self.shared} and emulator == self.shared and
                not channel)

    def close(self):
        self.conn.close()


class DemoOutput:
    """The demo's output, line by line, and which run it has reached."""

    def __init__(self, stream):
        self.lines = queue.Queue()
        self.text = []
        self.run = 0
        self.ended = False
        threading.Thread(target=self._read, args=(stream,),
                         daemon=True).start()

    def _read(self, stream):
        for line in stream:
            self.lines.put(line)
        self.lines.put(None)

    def follow(self, timeout):
        """Take the lines that come within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.ended:
            try:
                line = self.lines.get(
                    timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            if line is None:
                self.ended = True
                return
            self.text.append(line)
            if line.startswith(RUN1):
                self.run = 1
            elif line.startswith(RUN2):
                self.run = 2


def run_demo(out, before):
    """Run ufo-demo; check the guests while it runs. Returns what it saw.

    A look at the guests during run 1 counts only when the demo has not
    announced run 2 by a second after it: one that overlapped the start
    of the agent says nothing of the run without it.
    """
    proc = subprocess.Popen(
        [sys.executable, '-m', 'ufo_tools.demo.run', '--out', str(out),
         '--phase-seconds', str(PHASE_SECONDS), '--plain'],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    demo = DemoOutput(proc.stdout)
    watcher = Watcher(before)
    seen = {'run1_samples': 0, 'run1_faults': [], 'run2_changed': 0,
            'run2_samples': 0}
    deadline = time.monotonic() + 600
    try:
        while not demo.ended:
            demo.follow(2.0)
            if demo.run == 1:
                agents = agent_processes(str(out))
                guests = watcher.sample()
                files = [p.name for p in (out / 'agent').glob('*')
                         if p.name != 'nova.conf']
                demo.follow(1.0)
                if demo.run == 1:
                    if agents or files or len(guests) != 3:
                        seen['run1_faults'].append((agents, files, guests))
                    seen['run1_faults'].extend(
                        (name, pins) for name, pins in guests.items()
                        if not watcher.as_nova_wrote(pins))
                    seen['run1_samples'] += 1
            elif demo.run == 2 and agent_processes(str(out)):
                guests = watcher.sample()
                seen['run2_samples'] += 1
                seen['run2_changed'] += any(
                    not watcher.as_nova_wrote(p) for p in guests.values())
            if time.monotonic() > deadline:
                raise AssertionError('ufo-demo still running after 600 s')
        seen['rc'] = proc.wait(60)
    finally:
        watcher.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    seen['output'] = ''.join(demo.text)
    return seen


def test_demo_runs_without_and_with_the_agent(guest_artifacts, tmp_path):
    before = _domains()
    out = tmp_path / 'out'
    seen = run_demo(out, before)
    output = seen['output']
    assert seen['rc'] == 0, 'ufo-demo %s\n%s' % (
        harness.why_exited(seen['rc'], output), output[-5000:])

    # Without the agent, as the test saw it: no agent, Nova's pins.
    assert seen['run1_faults'] == [], seen['run1_faults'][:5]
    assert seen['run1_samples'] >= 2 * len(PHASES), seen['run1_samples']
    # With it, the agent changed the pins (it parks quiet guests).
    assert seen['run2_changed'] > 0, seen

    summary = json.loads((out / 'summary.json').read_text())
    nova, ufo = summary['runs']['nova'], summary['runs']['ufo']
    lc, be = scenario.LC, scenario.BE
    for run in nova, ufo:
        assert [p['phase'] for p in run['phases']] == PHASES
        # Every phase recorded (a status read may fail now and then).
        assert all(p['seconds'] >= 0.8 * PHASE_SECONDS
                   for p in run['phases']), run['phases']
        for p, phase in zip(run['phases'], scenario.PHASES):
            # The LC guest reported its latency when loaded, else none;
            # the BE guest's batch job its work in every phase.
            g = p['guests'][lc]
            assert (g['p99_ms'] is not None) == bool(phase.lc_rate), p
            assert (g['qos_met'] is None) == (g['p99_ms'] is None)
            assert p['guests'][be]['work_per_s'] > 0, p
            assert p['guests'][scenario.IDLE]['work_per_s'] is None
    assert set(summary['difference']) == set(PHASES)
    assert summary['shows_difference'] in (True, False)
    # The demo's own record of the run without the agent agrees.
    assert summary['nova_pins']['samples'] == nova['seconds'] > 0
    assert summary['nova_pins']['as_nova_wrote'] == nova['seconds']
    rows = json.loads((out / 'timeline.json').read_text())
    cores = nova['managed_cores']
    assert cores == ufo['managed_cores'] > 0
    for r in rows['nova']:
        for name, vm in r['vms'].items():
            assert (vm['mode'], vm['cores'], vm['online_vcpus']) == (
                'floating', cores, 2), (name, r)

    # ufo-agent gave the guests fewer cores: each its own pool (disjoint,
    # so together at most the host's), not each the whole shared set.
    per_guest = {k: s['guest_core_seconds'] / s['seconds']
                 for k, s in summary['runs'].items()}
    assert per_guest['nova'] == 3 * cores
    assert per_guest['ufo'] <= cores < per_guest['nova'], per_guest
    for p_nova, p_ufo in zip(nova['phases'], ufo['phases']):
        assert p_nova['cores_given'] == cores
        assert p_ufo['cores_given'] <= cores

    # The BE guest soaks: no core of its own, every vCPU online, idle
    # priority (from the agent's first enforced tick on).
    soaked = [r['vms'][be] for r in rows['ufo']]
    assert all(v['mode'] == 'be' and v['cores'] == 0 for v in soaked)
    assert sum(bool(v['idle_priority']) and v['online_vcpus'] == 2
               for v in soaked) >= 0.9 * len(soaked), soaked
    # The LC guest holds cores of its own while loaded and is parked
    # once quiet for idle_after, within the quiet phase.
    by_phase = {}
    for r in rows['ufo']:
        by_phase.setdefault(r['phase'], []).append(r['vms'][lc])
    for phase in scenario.PHASES:
        seen = by_phase[phase.name]
        if phase.lc_rate:
            assert sum(v['cores'] >= 1 for v in seen) >= 0.8 * len(seen)
        else:
            assert seen[-1]['mode'] == 'idle', seen
    # The idle guest is parked once quiet for idle_after, within the
    # first phase, and holds a core again only when it gets busy.
    assert parking_faults(rows['ufo'], 'idle') == []
    assert rows['ufo'][next(i for i, r in enumerate(rows['ufo'])
                            if r['vms']['idle']['mode'] == 'idle')][
        'phase'] == PHASES[0]

    # The fail-safe at the end: every vCPU online, Nova's pins back.
    assert summary['agent_exit'] == 0
    assert summary['restored_online_cpus'] == {
        name: [0, 1] for name in scenario.GUESTS}
    assert summary['restored_pins_as_nova_wrote'] is True
    assert summary['restored_normal_priority'] is True

    # Both runs' summaries side by side, printed and written; the plot.
    text = (out / 'summary.txt').read_text()
    assert 'without ufo-agent' in text and 'with ufo-agent' in text
    assert 'QoS target of lc: p99 <= ' in text
    assert 'What ufo-agent changed:' in text
    for phase in PHASES:
        assert '\n' + phase in text
    printed = set(output.splitlines())
    assert [line for line in text.splitlines() if line not in printed] == []
    assert (out / 'ufo-demo.png').stat().st_size > 10000
    assert _domains() == before
