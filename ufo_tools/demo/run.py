"""``ufo-demo``: three oversubscribed guests under ufo-agent, watched live.

Boots two latency-critical test guests and one idle guest (real QEMU under
libvirt, the ufo_guest module loaded), runs the real ``ufo-agent`` on
every host CPU, drives the LC guests' load through the phases of
``scenario.PHASES`` and shows the agent's view each second. At the end it
gives the guests back (SIGTERM: the fail-safe path), destroys them and
writes ``ufo-demo.png``, ``summary.txt``, ``summary.json`` and
``timeline.json`` into the output directory.
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
from ufo_tools.demo import scenario
from ufo_tools.demo import timeline as timeline_mod
from ufo_tools import e2e as harness
from ufo_tools import testguest

DECISION = re.compile(r'ufo_agent\.decisions \[-\] (t=\S+ vm=(\S+) '
                      r'action=(\S+) .*)$')


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


def view(elapsed, phase_no, phase, left, snap, p99, recent):
    lines = ['UFO demo  t=%3.0fs  phase %d/%d %s: %s  (next in %2.0fs)'
             % (elapsed, phase_no, len(scenario.PHASES), phase.name,
                phase.describe(), left), '']
    lines.append(status_cmd.format_status(snap))
    lines.append('')
    lines.append('workload p99: ' + '   '.join(
        '%s %s' % (name, '%.1f ms' % (v / 1000.0) if v else '-')
        for name, v in sorted(p99.items())))
    lines.append('')
    lines.append('recent decisions:')
    lines.extend('  ' + line[:110] for line in recent[-6:])
    return '\n'.join(lines)


def compact(snap, names):
    return '  '.join('%s:%s/%dc/%dv' % (names[v['uuid']], v['mode'][:4],
                                        v['cores'], v['online_vcpus'])
                     for v in snap.get('vms', []) if v['uuid'] in names)


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


def run(args):
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    print('Starting libvirtd and building the test guest ...', flush=True)
    testguest.start_libvirtd()
    testguest.build_artifacts()
    cpus = harness.host_online_cpus()
    cores = physical_cores(cpus)
    options = scenario.agent_options(cores, args.idle_after)
    workdir = out / 'agent'
    workdir.mkdir(exist_ok=True)
    # A log of an earlier run would mix into the decisions counted.
    with contextlib.suppress(FileNotFoundError):
        (workdir / 'agent.log').unlink()
    guests = {}
    with contextlib.ExitStack() as stack:
        for name in scenario.GUESTS:
            print('Booting guest %s (%d vCPUs) ...' % (name, args.vcpus),
                  flush=True)
            guests[name] = stack.enter_context(harness.nova_guest(
                vcpus=args.vcpus, name=name, flavor='demo.%d' % args.vcpus,
                vm_class='lc' if name in scenario.LC_GUESTS else None,
                memory_mib=192))
        names = {g.dom.UUIDString(): name for name, g in guests.items()}
        print('%d guest vCPUs on %d cores (%d CPUs); starting ufo-agent%s'
              % (args.vcpus * len(guests), cores, len(cpus),
                 ' in small-host mode' if
                 'controller__emulator_min_cores' in options else ''),
              flush=True)
        agent = harness.AgentProcess(workdir, **options).start()
        stack.callback(agent.stop, signal.SIGTERM)
        agent.wait(lambda s: sum(v['uuid'] in names and v['signal'] ==
                                 'guest' for v in s.get('vms', [])) ==
                   len(names), timeout=120, what='every guest managed')
        timeline = timeline_mod.Timeline(names)
        consoles = {n: Console(g) for n, g in guests.items()}
        p99 = {n: None for n in scenario.LC_GUESTS}
        tty = sys.stdout.isatty() and not args.plain
        start = time.monotonic()
        for number, phase in enumerate(scenario.PHASES, 1):
            for name in scenario.LC_GUESTS:
                harness.set_load(guests[name], phase.rates[name],
                                 report=True)
                p99[name] = None
            phase_end = time.monotonic() + args.phase_seconds
            next_tick = time.monotonic()
            while time.monotonic() < phase_end:
                next_tick += 1.0
                time.sleep(max(0.0, next_tick - time.monotonic()))
                try:
                    snap = agent.poll()
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
                recent = [d[2] for d in decisions(agent.log_text(), names)]
                if tty:
                    sys.stdout.write('\033[H\033[2J' + view(
                        elapsed, number, phase, phase_end - time.monotonic(),
                        snap, p99, recent) + '\n')
                    sys.stdout.flush()
                elif len(timeline.rows) % 5 == 0:
                    print('t=%3.0fs %-10s %s' % (elapsed, phase.name,
                                                 compact(snap, names)),
                          flush=True)
        for name in scenario.LC_GUESTS:
            harness.set_load(guests[name], 0)
        rc = agent.stop(signal.SIGTERM)
        restored = {name: sorted(g.online_cpus())
                    for name, g in guests.items()}
        log = agent.log_text()
    # Guests are destroyed here; write what was seen.
    counts = collections.Counter(d[1] for d in decisions(log, names))
    summary = timeline.summary()
    summary['decisions'] = dict(counts)
    summary['agent_exit'] = rc
    summary['restored_online_cpus'] = restored
    text = timeline_mod.format_summary(summary, counts)
    text += '\nufo-agent stopped with %s; vCPUs online after restore: %s' % (
        rc, ', '.join('%s %s' % kv for kv in sorted(restored.items())))
    (out / 'summary.txt').write_text(text + '\n')
    (out / 'summary.json').write_text(json.dumps(summary, indent=2) + '\n')
    (out / 'timeline.json').write_text(json.dumps(
        [dataclasses.asdict(r) for r in timeline.rows]) + '\n')
    png = out / 'ufo-demo.png'
    from ufo_tools.demo import plot
    plot.write_png(timeline, str(png), title='ufo-agent on %d cores: two '
                   'LC guests and an idle one (%d vCPUs)' % (
                       summary['managed_cores'], summary['guest_vcpus']))
    print('\n' + text)
    print('\nPlot: %s\nSummary: %s\nAgent log: %s' % (
        png, out / 'summary.txt', workdir / 'agent.log'))
    return 0 if rc == 0 else 1


def main(argv=None):
    parser = argparse.ArgumentParser(prog='ufo-demo', description=__doc__,
                                     formatter_class=argparse.
                                     RawDescriptionHelpFormatter)
    parser.add_argument('--out', default='ufo-demo-out',
                        help='output directory (default: %(default)s)')
    parser.add_argument('--phase-seconds', type=float, default=45.0,
                        help='length of each load phase (default: '
                             '%(default)s)')
    parser.add_argument('--vcpus', type=int, default=2,
                        help='vCPUs of each guest (default: %(default)s)')
    parser.add_argument('--idle-after', type=float, default=8.0,
                        help='seconds of no load before a guest is parked '
                             '(default: %(default)s)')
    parser.add_argument('--plain', action='store_true',
                        help='print a line every 5 s instead of the live '
                             'view')
    args = parser.parse_args(argv)
    missing = [name for name in ('libvirt', 'matplotlib')
               if importlib.util.find_spec(name) is None]
    if missing:
        print('ufo-demo needs %s: pip install \'ufo-nova[agent,plot]\''
              % ' and '.join(missing), file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print('ufo-demo needs root (libvirt qemu:///system, /dev/shm pages '
              'for QEMU)', file=sys.stderr)
        return 2
    return run(args)


if __name__ == '__main__':
    sys.exit(main())
