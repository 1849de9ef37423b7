"""``ufo-demo``: three oversubscribed guests, without and with ufo-agent.

Boots a latency-critical test guest, a best-effort one and an idle one
(real QEMU under libvirt, the ufo_guest module loaded) as Nova defines
shared-policy guests: every vCPU floating over ``[compute]
cpu_shared_set`` (here every host CPU). The BE guest runs a batch job
throughout; the LC guest's load goes through the phases of
``scenario.PHASES``. All of it twice: first without ufo-agent (Nova's
default, the guests' pins untouched), then with the real ``ufo-agent``
(which reads ``cpu_shared_set`` from a nova.conf), showing each second
what the guests are given. At the end it gives the guests back (SIGTERM:
the fail-safe path), destroys them and writes ``ufo-demo.png``,
``summary.txt``, ``summary.json`` and ``timeline.json`` into the output
directory, both runs side by side.
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
import textwrap
import time

from ufo_agent.cmd import status as status_cmd
from ufo_agent import cpuset
from ufo_agent.hypervisor import cgroup
from ufo_tools.demo import hostload
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


def simulator_answer():
    """(results, text): ``ufo-sim demo``, the scenario on the paper's host.

    None and how to get it when the simulator cannot run here (no
    ``sim`` extra, or no C compiler for its core).
    """
    started = time.monotonic()
    try:
        from ufo_sim.experiments import demo as sim_demo
        from ufo_sim.managers import cell as sim_cell
        out = sim_demo.run(sim_cell.Settings(**sim_demo.QUICK))
    except Exception as exc:    # ImportError, or the C core's build
        return None, ('The simulator could not run here (%s): pip install '
                      '".[sim]" and run ufo-sim demo for its answer on the '
                      'paper\'s host.' % exc)
    return out, '\n'.join([
        'The simulator\'s answer for this scenario on the paper\'s host '
        '(ufo-sim demo, %.0f s):' % (time.monotonic() - started),
        sim_demo.table(out), '\n'.join(textwrap.wrap(
            sim_demo.verdict(out), 79))])


def other_agents(own=()):
    """Pids of ufo-agent processes on this host other than ``own``.

    Another agent manages every Nova guest on the host, the demo's too:
    a run it overlaps is not what the demo says it is.
    """
    found = set()
    for cmdline in pathlib.Path('/proc').glob('[0-9]*/cmdline'):
        try:
            text = cmdline.read_bytes().replace(b'\0', b' ').decode()
        except (OSError, UnicodeDecodeError):
            continue
        pid = int(cmdline.parent.name)
        if pid not in own and ('ufo_agent.cmd.agent' in text or
                               'bin/ufo-agent ' in text + ' '):
            found.add(pid)
    return found


def qemu_pid(guest):
    with open('/run/libvirt/qemu/%s.pid' % guest.name) as f:
        return int(f.read())


def idle_priority(guest):
    """Whether the guest's cgroup runs at idle priority (``cpu.idle``)."""
    pid = qemu_pid(guest)
    tids = [int(t) for t in os.listdir('/proc/%d/task' % pid)]
    return cgroup.read_idle(cgroup.guest_group(pid, tids))


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

    def reports(self):
        """[(p99 us, done)] of the reports since the last call."""
        lines = self.guest.console.timed_lines(self.pos)
        self.pos += len(lines)
        out = []
        for _, line in lines:
            p99 = timeline_mod.p99_of(line)
            if p99 is not None:
                out.append((p99, timeline_mod.done_of(line)))
        return out


def start_batch(guest):
    """(Re)start the BE guest's batch job, reporting on the console."""
    guest.console.sh('killall ufo-workload 2>/dev/null; true')
    rc, _ = guest.console.sh('(ufo-workload batch=1 workers=%d >/dev/ttyS0 '
                             '2>&1 &)' % scenario.BE_WORKERS)
    if rc != 0:
        raise RuntimeError('could not start the batch job in %s'
                           % guest.name)


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


def view(run_no, elapsed, phase_no, phase, left, body, p99, work):
    key, title = RUNS[run_no - 1]
    lines = ['UFO demo, run %d of %d: %s  t=%3.0fs  phase %d/%d %s: %s  '
             '(next in %2.0fs)' % (run_no, len(RUNS), title, elapsed,
                                   phase_no, len(scenario.PHASES),
                                   phase.name, phase.describe(), left), '',
             body, '']
    value = p99.get(scenario.LC)
    lines.append('%s p99 (QoS target %g ms): %s    %s work: %s units/s' % (
        scenario.LC, scenario.QOS_P99_MS,
        '%.1f ms' % (value / 1000.0) if value else '-', scenario.BE,
        '%.0f' % work[scenario.BE] if work.get(scenario.BE) is not None
        else '-'))
    return '\n'.join(lines)


def run_phases(run_no, guests, consoles, observer, names, args, own=()):
    """Drive every phase once; a timeline of what the guests got.

    ``own``: the pid of the demo's agent, if it runs.
    """
    timeline = timeline_mod.Timeline(names)
    lc, be = scenario.LC, scenario.BE
    p99 = {lc: None}
    work = {be: None}
    tty = sys.stdout.isatty() and not args.plain
    meter = hostload.Meter([qemu_pid(g) for g in guests.values()],
                           len(harness.host_online_cpus()))
    start_batch(guests[be])
    start = time.monotonic()
    for number, phase in enumerate(scenario.PHASES, 1):
        harness.set_load(guests[lc], phase.lc_rate, svc_us=scenario.SVC_US,
                         workers=scenario.LC_WORKERS, report=True)
        p99[lc] = None
        consoles[be].reports()      # work from before the phase
        observer.read_online()
        timeline.other_agents |= other_agents(own)
        meter.start(time.monotonic())
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
            # A second in which no request completed measured no
            # latency (its p99 reads 0).
            served = [v for v, d in consoles[lc].reports() if d]
            if served or not phase.lc_rate:
                p99[lc] = served[-1] if phase.lc_rate else None
            work[be] = sum(d for _, d in consoles[be].reports() if d)
            timeline.add(time.monotonic(), phase.name, snap, p99, work)
            elapsed = time.monotonic() - start
            if tty:
                sys.stdout.write('\033[H\033[2J' + view(
                    run_no, elapsed, number, phase,
                    phase_end - time.monotonic(),
                    observer.describe(snap, names), p99, work) + '\n')
                sys.stdout.flush()
            elif len(timeline.rows) % 5 == 0:
                print('t=%3.0fs %-10s %s' % (elapsed, phase.name,
                                             compact(snap, names)),
                      flush=True)
        timeline.outside[phase.name] = meter.stop(time.monotonic())
        timeline.other_agents |= other_agents(own)
    # Both runs start from quiet guests.
    for name in (lc, be):
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
                vm_class=scenario.CLASSES[name],
                memory_mib=192, persistent=True,
                cpuset=cpuset.format_cpuset(shared)))
        names = {g.dom.UUIDString(): name for name, g in guests.items()}
        consoles = {n: Console(g) for n, g in guests.items()}

        announce(1, "Nova's default: every vCPU floats over the shared set "
                 "%s, no agent" % cpuset.format_cpuset(shared))
        nova = NovaObserver(guests, names, shared)
        timelines[NOVA] = run_phases(1, guests, consoles, nova, names, args)

        announce(2, '%d guest vCPUs on %d cores (%d CPUs); starting '
                 'ufo-agent%s, %s at idle priority (be_policy soak)'
                 % (args.vcpus * len(guests), cores, len(cpus),
                    ' in small-host mode' if
                    'controller__emulator_min_cores' in options else '',
                    scenario.BE))
        agent = harness.AgentProcess(workdir, **options).start()
        stack.callback(agent.stop, signal.SIGTERM)
        agent.wait(lambda s: sum(v['uuid'] in names and v['signal'] ==
                                 'guest' for v in s.get('vms', [])) ==
                   len(names), timeout=120, what='every guest managed')
        timelines[UFO] = run_phases(2, guests, consoles,
                                    AgentObserver(agent), names, args,
                                    own={agent.proc.pid})
        rc = agent.stop(signal.SIGTERM)
        restored = {name: sorted(g.online_cpus())
                    for name, g in guests.items()}
        nova.read_online()
        restored_pins = all(p.as_nova_wrote(shared)
                            for p in nova.pins().values())
        # The BE guest soaked at idle priority: back to normal.
        restored_priority = not any(idle_priority(g)
                                    for g in guests.values())
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
        'difference': timeline_mod.difference(
            summaries[NOVA], summaries[UFO], scenario.LC),
        'shows_difference': timeline_mod.shows_difference(
            summaries[NOVA], summaries[UFO], scenario.LC),
        'agent_exit': rc,
        'restored_online_cpus': restored,
        'restored_pins_as_nova_wrote': restored_pins,
        'restored_normal_priority': restored_priority,
    }
    text = timeline_mod.format_comparison(
        [(TITLES[key], summaries[key]) for key, _ in RUNS], qos,
        scenario.LC, scenario.BE, scenario.loads(),
        nova_pins=(nova.as_nova_wrote, nova.samples))
    if not summary['shows_difference']:
        print('No difference in this run: asking the simulator ...',
              flush=True)
        summary['simulator'], answer = simulator_answer()
        text += '\n\n' + answer
    text += ('\n\nwithout ufo-agent: no agent running; the guests had '
             'Nova\'s pins (shared set %s, every vCPU online) in %d of %d '
             'samples' % (cpuset.format_cpuset(shared), nova.as_nova_wrote,
                          nova.samples))
    text += '\nwith ufo-agent: ' + timeline_mod.format_agent(
        summaries[UFO], counts).replace('\n', '\n  ')
    text += ('\nufo-agent stopped with %s; vCPUs online after restore: %s; '
             'Nova\'s pins back: %s; normal priority back: %s' % (
                 rc, ', '.join('%s %s' % kv for kv in sorted(
                     restored.items())), 'yes' if restored_pins else 'NO',
                 'yes' if restored_priority else 'NO'))
    (out / 'summary.txt').write_text(text + '\n')
    (out / 'summary.json').write_text(json.dumps(summary, indent=2) + '\n')
    (out / 'timeline.json').write_text(json.dumps(
        {key: [dataclasses.asdict(r) for r in timelines[key].rows]
         for key, _ in RUNS}) + '\n')
    png = out / 'ufo-demo.png'
    from ufo_tools.demo import plot
    plot.write_png(
        [(TITLES[key], key == UFO, timelines[key], summaries[key])
         for key, _ in RUNS], str(png), qos, scenario.LC, scenario.BE,
        title='%d guests (%d vCPUs) on %d cores: without and with ufo-agent'
        % (len(guests), summaries[UFO]['guest_vcpus'], cores))
    print('\n' + text)
    print('\nPlot: %s\nSummary: %s\nAgent log: %s' % (
        png, out / 'summary.txt', workdir / 'agent.log'))
    return 0 if rc == 0 and restored_pins and restored_priority else 1


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
