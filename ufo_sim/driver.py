"""The agent's hypervisor driver over a simulated host.

:class:`SimDriver` lets the real ``ufo_agent.service.loop.Agent`` (and so the
real controller) run unmodified against :class:`ufo_sim.engine.SimHost`.
The host counters map one to one onto :class:`~ufo_agent.driver.base.
Observation`. The guest report is what the guest module would write: the
rates over the interval since the previous read, in the units and bounds
the host channel validates (utilization in 1/100 percent, never above
100 % per online vCPU). Software in a simulated guest may publish its
tail latency (:meth:`SimDriver.publish_latency`); the module's next
sample carries it as a real guest's page does, for the agent's own
``LatencyWatch`` to judge.

The engine dilates time (:data:`ufo_sim.engine.TIME_SCALE`: every
duration is stretched, every rate divided by the same factor). The driver
undoes it, so the agent sees a real host: its clock, the Observation
times and every nanosecond counter are simulated values divided by the
scale. One agent tick a second then spans ``TIME_SCALE`` simulated
seconds, and the controller's settle time, thresholds and rates keep
their real-world meaning.

The simulated guest takes its vCPUs on- or offline one at a time, each
costing the host model's hotplug time (``HostSpec.hotplug_cost``, the
paper's 20-30 ms), and acknowledges a target once it has carried it
out, as the guest module does. The agent's clock is the simulated one
and stands still while the agent runs, so the agent sleeps through
:meth:`SimDriver.sleep`, which runs the host on: the enforcer's wait for
a shrinking guest's answer lets the guest take its vCPUs offline before
the pins narrow, in the real agent's order. A harness that ticks the
agent advances the host to the end of each interval, not by a whole one.
"""

import dataclasses

from ufo_agent.channel import layout
from ufo_agent.channel import report as channel_report
from ufo_agent.driver import base
from ufo_sim import engine


def _nic(counters):
    """An LC guest's one NIC: a request in, a response out.

    The model has no packet sizes: each packet is one byte.
    """
    arrived, done = int(counters.requests_arrived), \
        int(counters.requests_done)
    return base.NicCounters(arrived, done, arrived, done)


@dataclasses.dataclass
class _SimGuest:
    guest: base.Guest
    vcpu_pins: frozenset
    emulator_pins: frozenset
    seq: int = 0
    target: int = None      # vCPUs online the last target asks for
    done_seq: int = 0       # the last target carried out
    sample_count: int = 0
    last_time: float = None
    last_busy_ns: int = 0
    last_ctxsw: int = 0
    last_sched_in: int = 0
    report: object = None
    vcpus_idle: bool = False
    # What software in the guest last published (us) and how often:
    # the page's latency_us and latency_seq.
    latency_us: int = None
    latency_seq: int = 0


class SimDriver(base.HypervisorDriver):
    """Drives one :class:`SimHost`; guests are added with :meth:`add`."""

    def __init__(self, host, time_scale=engine.TIME_SCALE):
        self.host = host
        self.time_scale = float(time_scale)
        self.all_cpus = frozenset(c for group in host.siblings
                                  for c in group)
        self._guests = {}
        self._events = []

    def add(self, vm, vcpus, name=None, vm_class='lc', channel=True,
            latency_target_us=None, latency_percentile=99.0):
        """Manage simulated VM ``vm`` (the id ``SimHost.add_vm`` returned).

        It starts the way Nova boots it on a shared host: every vCPU and
        emulator thread floats over all host CPUs, all vCPUs online.
        ``latency_target_us`` and ``latency_percentile``: its flavor's
        ``ufo:latency_target_us`` and ``ufo:latency_percentile``.
        """
        guest = base.Guest(
            uuid=vm, name=name or vm, vcpus=vcpus, vm_class=vm_class,
            restore_vcpu_cpus=self.all_cpus,
            restore_emulator_cpus=self.all_cpus, has_channel=channel,
            latency_target_us=latency_target_us,
            latency_percentile=latency_percentile)
        self._guests[vm] = _SimGuest(guest, self.all_cpus, self.all_cpus)
        self.host.pin_vcpus(vm, sorted(self.all_cpus))
        self.host.pin_emulator(vm, sorted(self.all_cpus))
        self._events.append((vm, base.GuestEvent.STARTED))
        return guest

    def real_us(self, simulated_us):
        """Simulated microseconds as the agent's real ones, whole.

        A profile's QoS target becomes a flavor's
        ``ufo:latency_target_us`` this way.
        """
        return int(round(simulated_us / self.time_scale))

    def remove(self, vm):
        """Shut simulated VM ``vm`` down, as Nova deletes an instance.

        The engine stops it (in-flight work drains, then its threads
        sleep) and the agent sees the guest gone: a STOPPED event, and
        the guest no longer listed.
        """
        self._get(vm)
        self.host.stop_vm(vm)
        del self._guests[vm]
        self._events.append((vm, base.GuestEvent.STOPPED))

    # -- inventory -------------------------------------------------------
    def host_cpus(self):
        return base.HostCpus(siblings=tuple(tuple(g)
                                            for g in self.host.siblings),
                             numa_of_cpu=dict(self.host.numa_of_cpu),
                             online=self.all_cpus,
                             little=self.host.little)

    def guests(self):
        return [g.guest for _, g in sorted(self._guests.items())]

    def events(self):
        events, self._events = self._events, []
        return events

    # -- samples ---------------------------------------------------------
    def now(self):
        """The agent's clock: simulated time in real-world seconds."""
        return self.host.now / self.time_scale

    def observe(self, uuid):
        g = self._get(uuid)
        c = self.host.counters(uuid)
        now = self.now()
        report = None
        if g.guest.has_channel:
            report = self._guest_report(g, c, now)
        scale = self.time_scale
        return base.Observation(
            time=now, vcpu_cpu_ns=int(c.vcpu_cpu_ns / scale),
            vcpu_wait_ns=int(c.vcpu_wait_ns / scale),
            vcpu_slices=int(c.vcpu_slices),
            emulator_cpu_ns=int(c.emulator_cpu_ns / scale), guest=report,
            emulator_wait_ns=int(c.emulator_wait_ns / scale),
            emulator_threads=self.host.profile(uuid).emulator_threads,
            nics={'sim0': _nic(c)})

    def publish_latency(self, uuid, latency_us):
        """Software in the guest writes its tail latency (real us).

        As to ``/sys/kernel/ufo/latency_us``: the module's next sample
        carries it, its sequence one further.
        """
        g = self._get(uuid)
        g.latency_us = int(round(latency_us))
        g.latency_seq += 1

    def _guest_report(self, g, c, now):
        """The guest module's latest sample, as the host channel reads it.

        The module writes a new sample once per interval; reading twice
        within one simulated instant returns the same sample again.
        """
        if g.last_time is not None and now <= g.last_time:
            return g.report
        online = max(1, min(g.guest.vcpus, int(c.online_vcpus)))
        util = ctxsw = sched_in = 0
        interval_ns = 0
        if g.last_time is not None:
            span = now - g.last_time
            interval_ns = int(round(span * 1e9))
            busy = max(0, c.guest_busy_ns - g.last_busy_ns) / \
                self.time_scale
            # The page holds 1/100 percent as an integer, capped at what
            # the online vCPUs can run (the channel rejects more).
            util = min(int(busy / span / 1e5), 10000 * online)
            ctxsw = int(max(0, c.guest_ctxsw - g.last_ctxsw) / span)
            sched_in = min(ctxsw, int(
                max(0, c.guest_sched_in - g.last_sched_in) / span))
            g.sample_count += 1
        g.last_time = now
        g.last_busy_ns, g.last_ctxsw = c.guest_busy_ns, c.guest_ctxsw
        g.last_sched_in = c.guest_sched_in
        flags = layout.GUEST_FLAG_HOST_VALID | layout.GUEST_FLAG_SCHED_IN
        if g.latency_seq:
            flags |= layout.GUEST_FLAG_LATENCY
        sample = channel_report.GuestSample(
            flags=flags,
            ack_target_seq=self._carried_out(g, c.online_vcpus),
            applied_target=online if g.done_seq else 0,
            online_vcpus=online, present_vcpus=g.guest.vcpus,
            online_cpus=tuple(range(online)),
            sample_count=g.sample_count, timestamp_ns=int(now * 1e9),
            interval_ns=interval_ns, util=util / 100.0, steal=0.0,
            ctxsw_per_sec=ctxsw, own_ctxsw_per_sec=0, host_errors=0,
            watchdog_fires=0, sched_in_per_sec=sched_in,
            latency_us=g.latency_us, latency_seq=g.latency_seq)
        g.report = channel_report.GuestReport(channel_report.STATUS_OK,
                                              '', sample)
        return g.report

    # -- actions ---------------------------------------------------------
    def pin_vcpus(self, uuid, cpus):
        g = self._get(uuid)
        cpus = self._check_cpus(cpus)
        self.host.pin_vcpus(uuid, sorted(cpus))
        g.vcpu_pins = cpus

    def pin_emulator(self, uuid, cpus):
        g = self._get(uuid)
        cpus = self._check_cpus(cpus)
        self.host.pin_emulator(uuid, sorted(cpus))
        g.emulator_pins = cpus

    def set_vcpus_idle(self, uuid, idle):
        """Put the guest's vCPU threads in SCHED_IDLE (cgroup ``cpu.idle``).

        BE soak mode: the vCPUs may then run on LC cores, taking only
        what no normal thread there wants.
        """
        g = self._get(uuid)
        self.host.set_vcpus_idle(uuid, bool(idle))
        g.vcpus_idle = bool(idle)

    def set_vcpu_target(self, uuid, vcpus):
        g = self._get(uuid)
        if not g.guest.has_channel:
            return None
        if not 1 <= vcpus <= g.guest.vcpus:
            raise base.DriverError('target %d outside 1..%d'
                                   % (vcpus, g.guest.vcpus))
        self.host.set_online(uuid, vcpus, hotplug=True)
        g.seq += 1
        g.target = vcpus
        return g.seq

    def acknowledged(self, uuid, seq):
        g = self._get(uuid)
        return seq is not None and \
            seq <= self._carried_out(g, self.host.online(uuid))

    @staticmethod
    def _carried_out(g, online):
        """The last target sequence the guest has carried out.

        The engine counts a vCPU online until its teardown is done, and
        one coming online once its bring-up is done: the count is the
        target's once the guest is done with it.
        """
        if g.seq and online == g.target:
            g.done_seq = g.seq
        return g.done_seq

    def sleep(self, seconds):
        """The agent's wait of ``seconds`` (real): the host runs on."""
        self.host.advance(seconds * self.time_scale)

    def heartbeat(self):
        """Nothing to refresh: a simulated guest's watchdog never fires."""

    def read_pins(self, uuid):
        g = self._get(uuid)
        return {g.vcpu_pins}, g.emulator_pins

    def release(self, uuid):
        g = self._get(uuid)
        if g.vcpus_idle:
            self.set_vcpus_idle(uuid, False)
        self.host.set_online(uuid, g.guest.vcpus, hotplug=True)
        self.pin_vcpus(uuid, g.guest.restore_vcpu_cpus)
        self.pin_emulator(uuid, g.guest.restore_emulator_cpus)

    def forget(self, uuid):
        self._guests.pop(uuid, None)

    def _get(self, uuid):
        try:
            return self._guests[uuid]
        except KeyError:
            raise base.DriverError('no simulated guest %s' % uuid)

    def _check_cpus(self, cpus):
        cpus = frozenset(cpus)
        if not cpus or not cpus <= self.all_cpus:
            raise base.DriverError('CPUs %s are not a non-empty subset of '
                                   'the host' % sorted(cpus))
        return cpus
