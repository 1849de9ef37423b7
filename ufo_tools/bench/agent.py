"""Run the real agent loop over guests; time its ticks, CPU and memory.

Without ``--fake`` it boots ``--guests`` real test guests (libvirt and
QEMU). With ``--fake`` the loop, controller, enforcer, sampler and
libvirt driver run unchanged over a fake host of ``--guests`` loaded Nova
guests on 128 CPUs (:mod:`ufo_tools.fakes.hypervisor`); each count runs
in a process of its own, so that its peak RSS is its own. The agent's
CPU time leaves out what the fake guests and the fake libvirt do in its
process (a real host's guests and libvirtd): see :meth:`_Ticker.tick`.
"""

import argparse
import collections
import contextlib
import cProfile
import dataclasses
import grp
import hashlib
import logging
import os
import pwd
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from ufo_agent.hypervisor.domain import NOVA_NS

FAKE_GUESTS = (100, 300, 500)


def _counts(text):
    try:
        counts = [int(n) for n in text.split(',')]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(
            'a guest count or a comma-separated list of them: %r' % text)
    return counts


def add_arguments(parser):
    parser.add_argument('--guests', type=_counts, default=None,
                        help='guests to boot (default 3); with --fake, one '
                             'count or a list (default %s)'
                             % ','.join(map(str, FAKE_GUESTS)))
    parser.add_argument('--vcpus', type=int, default=2,
                        help='vCPUs per real guest (default 2)')
    parser.add_argument('--ticks', type=int, default=30,
                        help='timed ticks per repeat (default 30)')
    parser.add_argument('--repeats', type=int, default=3,
                        help='repeats (default 3)')
    parser.add_argument('--rate', type=int, default=200,
                        help='requests/s of each real guest\'s workload')
    fake = parser.add_argument_group('fake host (--fake)')
    fake.add_argument('--fake', action='store_true',
                      help='run over a fake host of loaded Nova guests '
                           'instead of real test guests')
    fake.add_argument('--interval', type=float, default=1.0,
                      help='seconds from one tick to the next (default 1)')
    fake.add_argument('--warmup', type=int, default=15,
                      help='untimed ticks after start (default 15)')
    fake.add_argument('--load', type=float, default=0.6,
                      help='the guests\' mean demand as a share of the '
                           'managed CPUs (default 0.6)')
    fake.add_argument('--wave', type=float, default=0.5,
                      help='how far each guest\'s demand swings around '
                           'its level, as a share of it (default 0.5; '
                           '0: a steady load)')
    fake.add_argument('--seed', type=int, default=1)
    fake.add_argument('--call-timeout', type=float, default=None,
                      help='libvirt call deadline, s (default: the '
                           'agent\'s, [agent] libvirt_call_timeout)')
    fake.add_argument('--hang-ticks', type=int, default=12,
                      help='ticks with one guest whose libvirt calls hang '
                           '(default 12; 0: none)')
    fake.add_argument('--hang-calls', choices=('all', 'pins'),
                      default='all',
                      help='which libvirt calls hang: all of the guest '
                           'with the most cores (its QEMU monitor does not '
                           'answer; the first call to meet it may be a '
                           'read), or only the pins of the guest pinned '
                           'most often (the hang meets the enforcer, with '
                           'other guests\' pins after it in the tick)')
    fake.add_argument('--profile', metavar='FILE',
                      help='write cProfile statistics of the timed ticks '
                           '(FILE.<guests> for a list of counts)')
    fake.add_argument('--steps', action='store_true',
                      help='print the agent CPU of each step of the timed '
                           'ticks (listing, observing, drift check, '
                           'controller, enforcer, status)')
    fake.add_argument('--log', metavar='FILE',
                      help='keep the agent\'s log (INFO) in FILE '
                           '(FILE.<guests> for a list of counts)')


def run(args):
    if args.fake:
        return _run_fake(args)
    return _run_real(args)


# -- real test guests --------------------------------------------------------
def _metadata(name, vcpus):
    return ('<instance><name>%s</name><flavor name="bench"><vcpus>%d'
            '</vcpus></flavor></instance>' % (name, vcpus))


def _run_real(args):
    import libvirt

    from ufo_agent.controller import ControllerConfig
    from ufo_agent.driver.libvirt import driver as libvirt_driver
    from ufo_agent.hypervisor import sysfs
    from ufo_agent.service import loop
    from ufo_tools import testguest

    if args.guests and len(args.guests) > 1:
        print('ufo-bench agent: --guests takes one count without --fake',
              file=sys.stderr)
        return 2
    count = (args.guests or [3])[0]
    testguest.start_libvirtd()
    print('ufo-bench agent: booting %d test guests (%s)'
          % (count, testguest.accel()))
    with contextlib.ExitStack() as stack:
        guests = []
        for i in range(count):
            guest = testguest.TestGuest(
                vcpus=args.vcpus, channel=False,
                cmdline='ufo.rate=%d ufo.svc_us=500' % args.rate)
            stack.callback(guest.close)
            guest.start()
            guest.dom.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT,
                                  _metadata('bench-%d' % i, args.vcpus),
                                  'nova', NOVA_NS,
                                  libvirt.VIR_DOMAIN_AFFECT_LIVE)
            guests.append(guest)
        host = sysfs.host_cpus()
        driver = libvirt_driver.LibvirtDriver(
            managed_cpus=host.online, qemu_user=testguest.QEMU_USER,
            qemu_group=testguest.QEMU_GROUP)
        stack.callback(driver.close)
        for guest in guests:
            stack.callback(driver.forget, guest.dom.UUIDString())
        agent = loop.Agent(driver, host.online, ControllerConfig())
        agent.start()
        stack.callback(agent.stop)
        medians = []
        for rep in range(args.repeats):
            cpu_ms, wall_ms = [], []
            for _ in range(args.ticks):
                cpu0, wall0 = time.process_time(), time.monotonic()
                agent.tick()
                cpu_ms.append(1000.0 * (time.process_time() - cpu0))
                wall_ms.append(1000.0 * (time.monotonic() - wall0))
                time.sleep(max(0.0, 1.0 - (time.monotonic() - wall0)))
            medians.append(statistics.median(cpu_ms))
            print('repeat %d: tick CPU median %.2f ms (max %.2f), wall '
                  'median %.2f ms; %d guests managed, %s'
                  % (rep + 1, medians[-1], max(cpu_ms),
                     statistics.median(wall_ms), len(agent.guests),
                     ', '.join('%s %s' % (s.name, s.signal)
                               for s in agent.status.values())))
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        share = statistics.median(medians) / 10.0
        print('agent CPU: %.2f%% of one core at one tick per second '
              '(the paper\'s host module: < 5%%)' % share)
        print('RESULT tick_cpu_ms_median=%.3f rss_mb=%.1f guests=%d'
              % (statistics.median(medians), rss_mb, count))
    return 0


# -- a fake host -------------------------------------------------------------
def _run_fake(args):
    counts = args.guests or list(FAKE_GUESTS)
    if len(counts) == 1:
        measure(args, counts[0])
        return 0
    status = 0
    for count in counts:
        sys.stdout.flush()
        # A process per count: ru_maxrss is the peak of the process.
        status |= subprocess.call(
            [sys.executable, '-m', 'ufo_tools.bench.cli', 'agent',
             '--guests', str(count)] + _fake_options(args, count))
    return status


def _fake_options(args, count):
    """The options of one count's process; its files are named by it."""
    options = ['--fake', '--ticks', str(args.ticks), '--repeats',
               str(args.repeats), '--interval', repr(args.interval),
               '--warmup', str(args.warmup), '--load', repr(args.load),
               '--wave', repr(args.wave),
               '--seed', str(args.seed), '--hang-ticks',
               str(args.hang_ticks), '--hang-calls', args.hang_calls]
    if args.call_timeout is not None:
        options += ['--call-timeout', repr(args.call_timeout)]
    if args.steps:
        options += ['--steps']
    if args.profile:
        options += ['--profile', '%s.%d' % (args.profile, count)]
    if args.log:
        options += ['--log', '%s.%d' % (args.log, count)]
    return options


@contextlib.contextmanager
def _fake_libvirt(fake):
    """``fake`` imported as ``libvirt``, with no event loop thread."""
    from ufo_agent.driver.libvirt import host as libvirt_host
    saved = sys.modules.get('libvirt')
    started = libvirt_host._event_loop_started
    sys.modules['libvirt'] = fake
    libvirt_host._event_loop_started = True
    try:
        yield
    finally:
        libvirt_host._event_loop_started = started
        if saved is None:
            sys.modules.pop('libvirt', None)
        else:
            sys.modules['libvirt'] = saved


@contextlib.contextmanager
def _agent_log(path):
    """The agent's log at INFO into ``path``, as in production; counts.

    Returns a Counter of records by level name.
    """
    counts = collections.Counter()

    class Counting(logging.FileHandler):
        def emit(self, record):
            counts[record.levelname] += 1
            super().emit(record)

    handler = Counting(path, mode='w')
    handler.setFormatter(logging.Formatter(
        '%(asctime)s %(levelname)s %(name)s %(message)s'))
    logger = logging.getLogger('ufo_agent')
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield counts
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
        handler.close()


@dataclasses.dataclass
class Measurement:
    """What one fake-host run measured, and what it left to check."""

    guests: int
    figures: dict
    hung: dict
    host: object                # the FakeHypervisor (closed)
    plan: object                # the agent's plan after the timed ticks
    pinned: dict                # the host's affinities then
    released: dict              # the host's affinities after its stop
    log_counts: dict


def _memory_dir():
    """/dev/shm where it is writable: /proc and /sys are not on a disk.

    On a disk file system, writing the counters and reading them back
    costs far more than reading the kernel's files does.
    """
    shm = '/dev/shm'
    return shm if os.access(shm, os.W_OK | os.X_OK) else None


def _me():
    return (pwd.getpwuid(os.getuid()).pw_name,
            grp.getgrgid(os.getgid()).gr_name)


def _pins_digest(pin_log):
    """A digest of the pins made, in order: equal on runs that pinned alike."""
    digest = hashlib.sha256()
    for _, uuid, call in pin_log:
        digest.update(repr((uuid, call)).encode())
    return digest.hexdigest()[:12]


def _percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p * (len(values) - 1))))]


class _Ticker:
    """Ticks the agent at ``interval``, the fake guests in between."""

    def __init__(self, agent, host, interval, profile=None):
        self.agent = agent
        self.host = host
        self.interval = interval
        self.profile = profile
        self.next = time.monotonic()
        self.ticks = 0
        self.origin = host.clock()
        self.queued = _QueuedClock()

    def tick(self, timed=False):
        """One tick: (start, wall, agent CPU, libvirtd CPU, calls, queued).

        Times in s. The agent's CPU time is the process's less what the
        fakes did in its place: the fake guests answering targets inside
        the tick (the enforcer's waits), and the fake libvirt answering
        calls, which libvirtd does on a real host (its CPU time and the
        calls are returned apart). The client's side of a call stays the
        agent's: the deadline's thread hand-off, and building and
        reading the call's values. Queued is the part of the wall the
        loop's thread waited for a CPU (:class:`_QueuedClock`).
        """
        self.next += self.interval
        # The host's clock ticks at ``interval`` whatever the machine
        # does: a seed gives the same loads and answers on every run.
        self.ticks += 1
        self.host.advance(self.origin + self.ticks * self.interval)
        lv = self.host.libvirt
        guests, daemon, calls = (self.host.guest_seconds,
                                 lv.daemon_seconds, lv.daemon_calls)
        if timed and self.profile is not None:
            self.profile.enable()
        # The wall encloses the run-delay reads: a wait for a CPU just
        # before a read is then inside the wall it is part of.
        cpu0, start = time.process_time(), time.monotonic()
        queued = self.queued()
        self.agent.tick()
        queued = self.queued() - queued
        wall = time.monotonic() - start
        cpu = time.process_time() - cpu0
        if timed and self.profile is not None:
            self.profile.disable()
        daemon = lv.daemon_seconds - daemon
        cpu -= (self.host.guest_seconds - guests) + daemon
        calls = lv.daemon_calls - calls
        delay = self.next - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            self.next = time.monotonic()
        return start, wall, cpu, daemon, calls, queued


# The steps of a tick whose agent CPU --steps adds up: (name, the
# agent's attribute that owns it or None for the loop, method).
_STEPS = (('guests', None, '_sync_guests'), ('observe', None, '_observe'),
          ('drift check', None, '_check_drift'),
          ('controller', 'controller', 'tick'),
          ('enforcer', 'enforcer', 'apply'),
          ('status', None, '_update_status'))
# The enforcer's waits for the guests' answers, within its step.
_ACK_WAITS = 'of it ack waits'


class _QueuedClock:
    """The calling thread's time waiting for a CPU so far, s (a call).

    The kernel's run delay of the thread that made it (``schedstat``):
    time it could have run but the machine's other work held every CPU.
    0 where the kernel does not say.
    """

    def __init__(self):
        try:
            self.fd = os.open('/proc/thread-self/schedstat', os.O_RDONLY)
        except OSError:
            self.fd = None

    def __call__(self):
        if self.fd is None:
            return 0.0
        return int(os.pread(self.fd, 128, 0).split()[1]) / 1e9

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class _StepClock:
    """The agent CPU and the wall time of each step of the ticks, while ``on``.

    CPU is counted as :class:`_Ticker` counts a tick's: the fakes' time
    is left out. Wall time is the machine's; ``queued`` the part of it
    the loop's thread waited for a CPU held by other work of the machine
    (see :class:`_QueuedClock`). The enforcer's waits for the guests'
    acknowledgements, within its step, are also added up apart.
    """

    def __init__(self, agent, host):
        self.host = host
        self.on = False
        self.queued = _QueuedClock()
        names = [name for name, _, _ in _STEPS]
        self.seconds = dict.fromkeys(names, 0.0)
        self.walls = dict.fromkeys(names + [_ACK_WAITS], 0.0)
        self.waits = dict.fromkeys(names + [_ACK_WAITS], 0.0)
        for name, owner, method in _STEPS + (
                (_ACK_WAITS, 'enforcer', '_wait'),):
            target = agent if owner is None else getattr(agent, owner)
            setattr(target, method, self._timed(name, getattr(target,
                                                              method)))

    def _fakes(self):
        return self.host.guest_seconds + self.host.libvirt.daemon_seconds

    def _timed(self, name, func):
        def timed(*args, **kwargs):
            if not self.on:
                return func(*args, **kwargs)
            fakes, cpu = self._fakes(), time.process_time()
            # The wall encloses the run-delay reads (see _Ticker.tick).
            wall = time.monotonic()
            queued = self.queued()
            try:
                return func(*args, **kwargs)
            finally:
                self.waits[name] += self.queued() - queued
                self.walls[name] += time.monotonic() - wall
                if name in self.seconds:
                    self.seconds[name] += (time.process_time() - cpu) - (
                        self._fakes() - fakes)
        return timed


class _Lag:
    """How long each guest's pins trail the agent's plan.

    A guest falls behind at the start of the first tick after which
    libvirt does not show the vCPU and emulator pins the plan gives it,
    and catches up when libvirt last pinned it before it shows them.
    A guest waiting for its acknowledgement trails by a tick or so. A
    guest pinned to its plan within a tick trails from the tick's start
    (pins that wait behind a hung call in the same tick count).
    """

    def __init__(self, host, skip=()):
        self.host = host
        self.skip = frozenset(skip)
        self.behind = {}            # uuid -> since when
        self.lags = []              # seconds, of guests that caught up

    def after_tick(self, agent, start):
        plan = agent.last_plan
        if plan is None:
            return
        actual = self.host.affinities()
        doms = {g.uuid: g.domain for g in self.host.guests}
        for uuid, vm in plan.vms.items():
            if uuid in self.skip or uuid in agent.paused:
                continue
            if actual.get(uuid) == (vm.cpus, plan.emulator_cpus):
                since = self.behind.pop(uuid, None)
                pinned_at = doms[uuid].pinned_at
                if since is None and pinned_at is not None and \
                        pinned_at >= start:
                    since = start
                if since is not None:
                    self.lags.append(max(0.0, pinned_at - since))
            else:
                self.behind.setdefault(uuid, start)

    def worst(self, now):
        """The longest lag, counting those still behind up to ``now``."""
        return max(self.lags + [now - t for t in self.behind.values()],
                   default=0.0)


def measure(args, count, out=print):
    """Run the agent over a fake host of ``count`` guests; print RESULTs."""
    from ufo_agent.controller import ControllerConfig
    from ufo_agent.driver.libvirt import driver as libvirt_driver
    from ufo_agent.service import heartbeat as heartbeat_mod
    from ufo_agent.service import loop
    from ufo_agent.service import settings as settings_mod
    from ufo_tools.fakes import hypervisor

    settings = settings_mod.AgentSettings()
    if args.call_timeout is not None:
        settings = dataclasses.replace(
            settings, libvirt_call_timeout=args.call_timeout)
    deadline = settings.libvirt_call_timeout
    # Process CPU: what the libvirt call threads burn counts where the
    # loop waits for them.
    profile = (cProfile.Profile(time.process_time) if args.profile
               else None)
    user, group = _me()
    with contextlib.ExitStack() as stack:
        root = stack.enter_context(tempfile.TemporaryDirectory(
            prefix='ufo-bench-agent-', dir=_memory_dir()))
        host = hypervisor.FakeHypervisor(root, count, seed=args.seed,
                                         load=args.load, wave=args.wave)
        stack.callback(host.close)
        log_counts = stack.enter_context(_agent_log(
            args.log or os.path.join(root, 'agent.log')))
        stack.enter_context(_fake_libvirt(host.libvirt))
        driver = libvirt_driver.LibvirtDriver(
            'qemu:///system', host.managed, shm_dir=host.shm,
            run_dir=host.run_dir, proc_root=host.proc,
            sysfs_root=host.sysfs, call_timeout=deadline,
            qemu_user=user, qemu_group=group, clock=host.clock)
        stack.callback(driver.close)
        # The agent runs on the host's clock (see _Ticker.tick).
        agent = loop.Agent(driver, host.managed, ControllerConfig(),
                           settings, clock=host.clock)
        # The guests answer while the enforcer waits for them.
        agent.enforcer.sleep = host.sleep
        beat = heartbeat_mod.Heartbeat(
            agent.driver, settings.heartbeat_interval,
            settings.liveness_window(args.interval),
            lambda: agent.last_progress)
        out('ufo-bench agent --fake: %d guests (%d vCPUs) on %d CPUs, '
            '%d managed; call deadline %.1f s'
            % (count, sum(g.vcpus for g in host.guests),
               2 * host.cores, len(host.managed), deadline))
        started = time.monotonic()
        agent.start()
        start_ms = 1000.0 * (time.monotonic() - started)
        beat.start()
        stack.callback(beat.stop)
        ticker = _Ticker(agent, host, args.interval, profile)
        stack.callback(ticker.queued.close)
        steps = _StepClock(agent, host) if args.steps else None
        if steps is not None:
            stack.callback(steps.queued.close)
        for _ in range(args.warmup):
            ticker.tick()

        walls, cpus, per_s, daemons, calls = [], [], [], [], []
        queues, unqueued, all_walls, all_queued = [], [], [], []
        lag = _Lag(host)
        lv = host.libvirt
        for rep in range(args.repeats):
            wall_ms, cpu_ms, daemon_ms, tick_calls = [], [], [], []
            queued_ms = []
            del host.pin_log[:]
            cpu0, guests0 = time.process_time(), host.guest_seconds
            daemon0 = lv.daemon_seconds
            wall0 = time.monotonic()
            for _ in range(args.ticks):
                if steps is not None:
                    steps.on = True
                start, wall, cpu, daemon, sent, queued = ticker.tick(
                    timed=True)
                if steps is not None:
                    steps.on = False
                lag.after_tick(agent, start)
                wall_ms.append(1000.0 * wall)
                all_walls.append(1000.0 * wall)
                all_queued.append(1000.0 * queued)
                queued_ms.append(1000.0 * queued)
                cpu_ms.append(1000.0 * cpu)
                daemon_ms.append(1000.0 * daemon)
                tick_calls.append(sent)
            # Everything the process did but the fakes: ticks, heartbeat
            # thread, libvirt call threads.
            per_s.append(1000.0 * ((time.process_time() - cpu0) -
                                   (host.guest_seconds - guests0) -
                                   (lv.daemon_seconds - daemon0)) /
                         (time.monotonic() - wall0))
            walls.append(statistics.median(wall_ms))
            queues.append(statistics.median(queued_ms))
            unqueued.append(statistics.median(
                w - q for w, q in zip(wall_ms, queued_ms)))
            cpus.append(statistics.median(cpu_ms))
            daemons.append(statistics.median(daemon_ms))
            calls.append(statistics.median(tick_calls))
            out('repeat %d: tick wall median %.1f ms (p95 %.1f, max %.1f; '
                'queued for a CPU median %.1f); '
                'agent CPU median %.2f ms a tick (max %.2f), %.2f ms a '
                'second with its threads; fake libvirtd %.2f ms and %d '
                'calls a tick; %d pins (digest %s)'
                % (rep + 1, walls[-1], _percentile(wall_ms, 0.95),
                   max(wall_ms), queues[-1], cpus[-1], max(cpu_ms), per_s[-1],
                   daemons[-1], calls[-1], len(host.pin_log),
                   _pins_digest(host.pin_log)))
        if steps is not None:
            timed = args.repeats * args.ticks
            out('agent CPU ms a tick by step (mean): %s' % ', '.join(
                '%s %.2f' % (name, 1000.0 * seconds / timed)
                for name, seconds in steps.seconds.items()))
            out('tick wall ms a tick by step (mean; of it queued for a '
                'CPU): %s; whole tick %.2f (%.2f)'
                % (', '.join('%s %.2f (%.2f)'
                             % (name, 1000.0 * seconds / timed,
                                1000.0 * steps.waits[name] / timed)
                             for name, seconds in steps.walls.items()),
                   statistics.mean(all_walls), statistics.mean(all_queued)))
        lag_ms = 1000.0 * lag.worst(time.monotonic())
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        managed = len(agent.guests)
        vms = agent.last_plan.vms.values() if agent.last_plan else ()
        with_cores = sum(1 for vm in vms if vm.cores)
        figures = {
            'tick_wall_ms_median': statistics.median(walls),
            'tick_queued_ms_median': statistics.median(queues),
            # What the wall would be on CPUs the agent had to itself.
            'tick_wall_less_queued_ms_median': statistics.median(unqueued),
            'agent_cpu_ms_per_tick_median': statistics.median(cpus),
            'agent_cpu_ms_per_s': statistics.median(per_s),
            'libvirtd_cpu_ms_per_tick_median': statistics.median(daemons),
            'libvirt_calls_per_tick_median': statistics.median(calls),
            'rss_mb': rss_mb,
            'start_ms': start_ms,
            'enforce_lag_ms_max': lag_ms,
            'managed': managed,
            'vms_with_cores': with_cores,
        }
        out('RESULT agent_fake_guests=%d tick_wall_ms_median=%.1f '
            'tick_queued_ms_median=%.1f tick_wall_less_queued_ms_median=%.1f '
            'agent_cpu_ms_per_tick_median=%.2f agent_cpu_ms_per_s=%.2f '
            'libvirtd_cpu_ms_per_tick_median=%.2f '
            'libvirt_calls_per_tick_median=%.0f '
            'rss_mb=%.1f start_ms=%.0f enforce_lag_ms_max=%.0f managed=%d '
            'vms_with_cores=%d'
            % (count, figures['tick_wall_ms_median'],
               figures['tick_queued_ms_median'],
               figures['tick_wall_less_queued_ms_median'],
               figures['agent_cpu_ms_per_tick_median'],
               figures['agent_cpu_ms_per_s'],
               figures['libvirtd_cpu_ms_per_tick_median'],
               figures['libvirt_calls_per_tick_median'], rss_mb, start_ms,
               lag_ms, managed, with_cores))

        pinned = host.affinities()
        plan = agent.last_plan
        hung = {}
        if args.hang_ticks > 0:
            hung = _hung_guest(ticker, host, agent, args.hang_ticks,
                               deadline, out, count, args.hang_calls)
        # No more ticks: the heartbeat thread would report the loop stuck.
        beat.stop()
        if hung:
            # Its last calls return (2 deadlines) before the agent stops.
            time.sleep(2 * deadline)
        if profile is not None:
            profile.dump_stats(args.profile)
            out('cProfile statistics of the timed ticks: %s' % args.profile)
        agent.stop()
        released = host.affinities()
        out('agent log: %s' % (', '.join(
            '%d %s' % (n, level) for level, n in sorted(log_counts.items()))
            or 'empty'))
    return Measurement(count, figures, hung, host, plan, pinned, released,
                       dict(log_counts))


def _hang(host, guest, seconds, calls):
    """``guest``'s libvirt calls (``calls``: all or pins) sleep."""
    if calls == 'all':
        host.hang(guest, seconds)
        return
    dom = guest.domain
    if not seconds:
        dom.__dict__.pop('_maybe_fail', None)
        return
    maybe_fail = type(dom)._maybe_fail

    def pins_hang(method):
        if method.startswith('pin'):
            time.sleep(seconds)
        maybe_fail(dom, method)

    dom._maybe_fail = pins_hang


def _hung_guest(ticker, host, agent, ticks, deadline, out, count,
                calls='all'):
    """Ticks with one guest whose libvirt calls sleep past the deadline.

    The guest with the most cores of its own hangs (its QEMU monitor
    stops answering): every call on it sleeps twice the deadline. With
    ``calls`` 'pins', only the pin calls of the guest pinned most often
    in the last repeat. Returns the figures, and prints
    them.
    """
    plan = agent.last_plan
    if calls == 'pins':
        # Pins hang only if there are pins to make: the guest pinned
        # most often in the last repeat.
        pins = collections.Counter(uuid for _, uuid, _ in host.pin_log)
        victim = min(host.guests, key=lambda g: (-pins[g.uuid], g.index))
    else:
        victim = min(host.guests, key=lambda g: (
            -len(plan.vms[g.uuid].cores) if plan and g.uuid in plan.vms
            else 0, g.index))
    del host.pin_log[:]
    lag = _Lag(host, skip={victim.uuid})
    _hang(host, victim, 2 * deadline, calls)
    walls = []
    try:
        for _ in range(ticks):
            start, wall = ticker.tick()[:2]
            lag.after_tick(agent, start)
            walls.append(1000.0 * wall)
    finally:
        _hang(host, victim, 0, calls)
    figures = {
        'call_deadline_ms': 1000.0 * deadline,
        'hung_tick_wall_ms_median': statistics.median(walls),
        'hung_tick_wall_ms_max': max(walls),
        'other_enforce_lag_ms_max': 1000.0 * lag.worst(time.monotonic()),
        'others_behind': len(lag.behind),
        'other_pins': sum(1 for _, uuid, _ in host.pin_log
                          if uuid != victim.uuid),
    }
    out('hung guest %s (%d vCPUs): %d ticks, walls %s ms'
        % (victim.uuid, victim.vcpus, ticks,
           ' '.join('%.0f' % w for w in walls)))
    out('RESULT agent_fake_guests=%d hung_guests=1 hang_calls=%s '
        'call_deadline_ms=%.0f '
        'hung_tick_wall_ms_median=%.1f hung_tick_wall_ms_max=%.1f '
        'other_enforce_lag_ms_max=%.0f others_behind=%d other_pins=%d'
        % (count, calls, figures['call_deadline_ms'],
           figures['hung_tick_wall_ms_median'],
           figures['hung_tick_wall_ms_max'],
           figures['other_enforce_lag_ms_max'], figures['others_behind'],
           figures['other_pins']))
    return figures
