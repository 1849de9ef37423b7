"""``ufo-demo``: three oversubscribed guests, without and with ufo-agent.

Boots two latency-critical test guests and one idle guest (real QEMU under
libvirt, the ufo_guest module loaded) as Nova defines shared-policy
guests: every vCPU floating over ``[compute] cpu_shared_set`` (here every
host CPU). Then it drives the LC guests' load through the phases of
``scenario.PHASES`` twice: first without ufo-agent (Nova's default, the
guests' pins untouched), then with the real ``ufo-agent`` (which reads
``cpu_shared_set`` from a nova.conf), showing each second what the guests
are given. At the end it gives the guests back (SIGTERM: the fail-safe
path), destroys them and writes ``ufo-demo.png``, ``summary.txt``,
``summary.json`` and ``timeline.json`` into the output directory, both
runs side by side.
"""

import argparse
import collections
import contextlib
import dataclasses
import importlib.util
import json
import os
import pathlib
import re
import signal
import sys
import time

from ufo_agent.cmd import status as status_cmd
from ufo_agent import cpuset
from ufo_tools.demo import nova_view
from ufo_tools.demo import scenario
from ufo_tools.demo import timeline as timeline_mod
from ufo_tools import e2e as harness
from ufo_tools import testguest

DECISION = re.compile(r'ufo_agent\.decisions \[-\] (t=\S+ vm=(\S+) '
                      r'action=(\S+) .*)$')

#: The two runs, in order: key, title.
NOVA, UFO = 'nova', 'ufo'
RUNS = ((NOVA, 'without ufo-agent'), (UFO, 'with ufo-agent'))
TITLES = dict(RUNS)


def physical_cores(cpus):
    cores = set()
    for cpu in cpus:
        base = '/sys/devices/system/cpu/cpu%d/topology/' % cpu
        try:
            with open(base + 'physical_package_id') as f:
                package = f.read().strip()
            with open(base + 'core_id') as f:
                core = f.read().strip()
        except OSError:
            package, core = '0', str(cpu)
        cores.add((package, core))
    return len(cores)


def decisions(log_text, names):
    """[(vm name, action, line)] from the agent's decision log."""
    out = []
    for line in log_text.splitlines():
        m = DECISION.search(line)
        if m:
            name = names.get(m.group(2), m.group(2))
            out.append((name, m.group(3),
                        m.group(1).replace(m.group(2), name)))
    return out


def compact(snap, names):
    return '  '.join('%s:%s/%dc/%dv' % (names[v['uuid']], v['mode'][:5],
                                        v['cores'], v['online_vcpus'])
                     for v in snap.get('vms', []) if v['uuid'] in names)


def nova_conf(path, shared):
    """The nova.conf the agent reads: Nova's cpu_shared_set, nothing else."""
    path.write_text('[compute]\ncpu_shared_set = %s\n'
                    % cpuset.format_cpuset(shared))
    return path


class Console:
    """Follows one guest's serial console for workload reports."""

    def __init__(self, guest):
        self.guest = guest
        self.pos = guest.console.position

    def latest_p99(self):
        lines = self.guest.console.timed_lines(self.pos)
        self.pos += len(lines)
        value = None
        for _, line in lines:
            p99 = timeline_mod.p99_of(line)
            if p99 is not None:
                value = p99
        return value


class NovaObserver:
    """The run without ufo-agent: guests' pins from libvirt each second.

    Counts the samples in which every guest had exactly the pins Nova's
    definition gives (see :meth:`nova_view.GuestPins.as_nova_wrote`).
    """

    def __init__(self, guests, names, shared):
        self.guests = guests
        self.uuids = {name: uuid for uuid, name in names.items()}
        self.shared = frozenset(shared)
        self.online = {}
        self.samples = 0
        self.as_nova_wrote = 0
        self.last = {}

    def read_online(self):
        # The guest's own count; only the agent changes it, so once a
        # phase is enough (a console command disturbs the workload).
        self.online = {name: len(g.online_cpus())
                       for name, g in self.guests.items()}

    def pins(self):
        out = {}
        for name, g in self.guests.items():
            vcpu_pins, emulator = harness.live_pins(g)
            out[self.uuids[name]] = nova_view.GuestPins(
                g.vcpus, self.online.get(name, g.vcpus), frozenset(vcpu_pins),
                emulator)
        return out

    def poll(self):
        pins = self.pins()
        self.samples += 1
        self.as_nova_wrote += all(p.as_nova_wrote(self.shared)
                                  for p in pins.values())
        self.last = pins
        return nova_view.status(pins, self.shared, physical_cores)

    def describe(self, snap, names):
        lines = ['no ufo-agent: Nova\'s pins (every vCPU and the emulator '
                 'on the shared set %s)' % cpuset.format_cpuset(self.shared)]
        for vm in snap.get('vms', []):
            lines.append('  %-6s vCPUs %d/%d online, may run on CPUs %s '
                         '(%d cores)' % (names[vm['uuid']],
                                         vm['online_vcpus'], vm['vcpus'],
                                         vm['cpus'], vm['cores']))
        return '\n'.join(lines)


class AgentObserver:
    """The run with ufo-agent: its /status each second."""

    def __init__(self, agent):
        self.agent = agent

    def read_online(self):
        pass    # the agent reports what the guests say

    def poll(self):
        return self.agent.poll()

    def describe(self, snap, names):
        recent = [d[2] for d in decisions(self.agent.log_text(), names)]
        return '\n'.join([status_cmd.format_status(snap), '',
                          'recent decisions:'] +
                         ['  ' + line[:110] for line in recent[-6:]])


def view(run_no, elapsed, phase_no, phase, left, body, p99):
    key, title = RUNS[run_no - 1]
    lines = ['UFO demo, run %d of %d: %s  t=%3.0fs  phase %d/%d %s: %s  '
             '(next in %2.0fs)' % (run_no, len(RUNS), title, elapsed,
                                   phase_no, len(scenario.PHASES),
                                   phase.name, phase.describe(), left), '',
             body, '']
    lines.append('workload p99 (QoS target %g ms): ' % scenario.QOS_P99_MS +
                 '   '.join('%s %s' % (name, '%.1f ms' % (v / 1000.0)
                                       if v else '-')
                            for name, v in sorted(p99.items())))
    return '\n'.join(lines)


def run_phases(run_no, guests, consoles, observer, names, args):
    """Drive every phase once; a timeline of what the guests got."""
    timeline = timeline_mod.Timeline(names)
    p99 = {n: None for n in scenario.LC_GUESTS}
    tty = sys.stdout.isatty() and not args.plain
    start = time.monotonic()
    for number, phase in enumerate(scenario.PHASES, 1):
        for name in scenario.LC_GUESTS:
            harness.set_load(guests[name], phase.rates[name], report=True)
            p99[name] = None
        observer.read_online()
        phase_end = time.monotonic() + args.phase_seconds
        next_tick = time.monotonic()
        while time.monotonic() < phase_end:
            next_tick += 1.0
            time.sleep(max(0.0, next_tick - time.monotonic()))
            try:
                snap = observer.poll()
            except OSError as exc:
                print('status unavailable: %s' % exc, flush=True)
                continue
            if snap is None:
                print(status_cmd.NO_DATA, flush=True)
                continue
            for name in scenario.LC_GUESTS:
                value = consoles[name].latest_p99()
                if value is not None or not phase.rates[name]:
                    p99[name] = value if phase.rates[name] else None
            timeline.add(time.monotonic(), phase.name, snap, p99)
            elapsed = time.monotonic() - start
            if tty:
                sys.stdout.write('\033[H\033[2J' + view(
                    run_no, elapsed, number, phase,
                    phase_end - time.monotonic(),
                    observer.describe(snap, names), p99) + '\n')
                sys.stdout.flush()
            elif len(timeline.rows) % 5 == 0:
                print('t=%3.0fs %-10s %s' % (elapsed, phase.name,
                                             compact(snap, names)),
                      flush=True)
    # Both runs start from quiet guests.
    for name in scenario.LC_GUESTS:
        harness.set_load(guests[name], 0)
    return timeline


def announce(run_no, text):
    key, title = RUNS[run_no - 1]
    print('\n=== Run %d of %d: %s: %s' % (run_no, len(RUNS), title, text),
          flush=True)


def run(args):
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    print('Starting libvirtd and building the test guest ...', flush=True)
    testguest.start_libvirtd()
    testguest.build_artifacts()
    cpus = harness.host_online_cpus()
    # Nova's cpu_shared_set on the demo host: every host CPU.
    shared = frozenset(cpus)
    cores = physical_cores(shared)
    workdir = out / 'agent'
    workdir.mkdir(exist_ok=True)
    # A log of an earlier run would mix into the decisions counted.
    with contextlib.suppress(FileNotFoundError):
        (workdir / 'agent.log').unlink()
    options = scenario.agent_options(cores, args.idle_after, args.idle_util)
    # The managed set comes from Nova's configuration, as on a compute
    # node.
    options.update({
        'host_cpus__managed_cpus': '',
        'host_cpus__nova_config': str(nova_conf(workdir / 'nova.conf',
                                                shared))})
    guests = {}
    timelines = {}
    with contextlib.ExitStack() as stack:
        for name in scenario.GUESTS:
            print('Booting guest %s (%d vCPUs on the shared set %s) ...'
                  % (name, args.vcpus, cpuset.format_cpuset(shared)),
                  flush=True)
            guests[name] = stack.enter_context(harness.nova_guest(
                vcpus=args.vcpus, name=name, flavor='demo.%d' % args.vcpus,
                vm_class='lc' if name in scenario.LC_GUESTS else None,
                memory_mib=192, persistent=True,
                cpuset=cpuset.format_cpuset(shared)))
        names = {g.dom.UUIDString(): name for name, g in guests.items()}
        consoles = {n: Console(g) for n, g in guests.items()}

        announce(1, "Nova's default: every vCPU floats over the shared set "
                 "%s, no agent" % cpuset.format_cpuset(shared))
        nova = NovaObserver(guests, names, shared)
        timelines[NOVA] = run_phases(1, guests, consoles, nova, names, args)

        announce(2, '%d guest vCPUs on %d cores (%d CPUs); starting '
                 'ufo-agent%s' % (args.vcpus * len(guests), cores, len(cpus),
                                  ' in small-host mode' if
                                  'controller__emulator_min_cores' in options
                                  else ''))
        agent = harness.AgentProcess(workdir, **options).start()
        stack.callback(agent.stop, signal.SIGTERM)
        agent.wait(lambda s: sum(v['uuid'] in names and v['signal'] ==
                                 'guest' for v in s.get('vms', [])) ==
                   len(names), timeout=120, what='every guest managed')
        timelines[UFO] = run_phases(2, guests, consoles,
                                    AgentObserver(agent), names, args)
        rc = agent.stop(signal.SIGTERM)
        restored = {name: sorted(g.online_cpus())
                    for name, g in guests.items()}
        nova.read_online()
        restored_pins = all(p.as_nova_wrote(shared)
                            for p in nova.pins().values())
        log = agent.log_text()
    # Guests are destroyed here; write what was seen.
    counts = collections.Counter(d[1] for d in decisions(log, names))
    qos = scenario.QOS_P99_MS
    summaries = {key: timelines[key].summary(qos) for key, _ in RUNS}
    summary = {
        'qos_p99_ms': qos,
        'phase_seconds': args.phase_seconds,
        'shared_cpus': sorted(shared),
        'runs': summaries,
        'nova_pins': {'samples': nova.samples,
                      'as_nova_wrote': nova.as_nova_wrote},
        'decisions': dict(counts),
        'agent_exit': rc,
        'restored_online_cpus': restored,
        'restored_pins_as_nova_wrote': restored_pins,
    }
    text = timeline_mod.format_comparison(
        [(TITLES[key], summaries[key]) for key, _ in RUNS], qos)
    text += ('\n\nwithout ufo-agent: no agent running; the guests had '
             'Nova\'s pins (shared set %s, every vCPU online) in %d of %d '
             'samples' % (cpuset.format_cpuset(shared), nova.as_nova_wrote,
                          nova.samples))
    text += '\nwith ufo-agent: ' + timeline_mod.format_agent(
        summaries[UFO], counts).replace('\n', '\n  ')
    text += ('\nufo-agent stopped with %s; vCPUs online after restore: %s; '
             'Nova\'s pins back: %s' % (
                 rc, ', '.join('%s %s' % kv for kv in sorted(
                     restored.items())), 'yes' if restored_pins else 'NO'))
    (out / 'summary.txt').write_text(text + '\n')
    (out / 'summary.json').write_text(json.dumps(summary, indent=2) + '\n')
    (out / 'timeline.json').write_text(json.dumps(
        {key: [dataclasses.asdict(r) for r in timelines[key].rows]
         for key, _ in RUNS}) + '\n')
    png = out / 'ufo-demo.png'
    from ufo_tools.demo import plot
    plot.write_png(
        [(TITLES[key], key == UFO, timelines[key], summaries[key])
         for key, _ in RUNS], str(png), qos,
        title='%d guests (%d vCPUs) on %d cores: without and with ufo-agent'
        % (len(guests), summaries[UFO]['guest_vcpus'], cores))
    print('\n' + text)
    print('\nPlot: %s\nSummary: %s\nAgent log: %s' % (
        png, out / 'summary.txt', workdir / 'agent.log'))
    return 0 if rc == 0 and restored_pins else 1


def main(argv=None):
    parser = argparse.ArgumentParser(prog='ufo-demo', description=__doc__,
                                     formatter_class=argparse.
                                     RawDescriptionHelpFormatter)
    parser.add_argument('--out', default='ufo-demo-out',
                        help='output directory (default: %(default)s)')
    parser.add_argument('--phase-seconds', type=float,
                        default=scenario.PHASE_SECONDS,
                        help='length of each load phase, in each run '
                             '(default: %(default)s)')
    parser.add_argument('--vcpus', type=int, default=2,
                        help='vCPUs of each guest (default: %(default)s)')
    parser.add_argument('--idle-after', type=float,
                        default=scenario.IDLE_AFTER,
                        help='seconds of no load before ufo-agent parks a '
                             'guest (default: %(default)s)')
    parser.add_argument('--idle-util', type=float,
                        default=scenario.IDLE_UTIL,
                        help='utilization (%% of one CPU) under which a '
                             'guest counts as idle (default: %(default)s)')
    parser.add_argument('--plain', action='store_true',
                        help='print a line every 5 s instead of the live '
                             'view')
    args = parser.parse_args(argv)
    missing = [name for name in ('libvirt', 'matplotlib')
               if importlib.util.find_spec(name) is None]
    if missing:
        print('ufo-demo needs %s: in a ufo-nova source checkout, '
              'pip install \'.[agent,plot]\'' % ' and '.join(missing),
              file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print('ufo-demo needs root (libvirt qemu:///system, /dev/shm pages '
              'for QEMU)', file=sys.stderr)
        return 2
    return run(args)


if __name__ == '__main__':
    sys.exit(main())
