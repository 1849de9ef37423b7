"""An in-memory hypervisor for unit tests of the agent loop and enforcer.

It records every call in order and checks, after each pin, that no CPU
belongs to two exclusive pools. It is a test double for one class at a
time; the functional tests drive real libvirt guests.
"""

from ufo_agent.channel import layout
from ufo_agent.channel import report
from ufo_agent.controller import ControllerConfig
from ufo_agent.driver import base
from ufo_agent.service import loop
from ufo_agent.service import settings as settings_mod


def fake_guest_report(util, ctxsw, online, count, latency=None):
    """A valid report from a module that publishes its switch-in rate.

    ``latency``: (us, seq) guest software published last, or None.
    """
    flags = layout.GUEST_FLAG_HOST_VALID | layout.GUEST_FLAG_SCHED_IN
    if latency is not None:
        flags |= layout.GUEST_FLAG_LATENCY
    sample = report.GuestSample(
        flags=flags,
        ack_target_seq=0, applied_target=0, online_vcpus=online,
        present_vcpus=online, online_cpus=tuple(range(online)),
        sample_count=count, timestamp_ns=count * 10 ** 9,
        interval_ns=10 ** 9, util=util, steal=0.0, ctxsw_per_sec=ctxsw,
        own_ctxsw_per_sec=0, host_errors=0, watchdog_fires=0,
        sched_in_per_sec=ctxsw,
        latency_us=latency[0] if latency else None,
        latency_seq=latency[1] if latency else 0)
    return report.GuestReport(report.STATUS_OK, '', sample)


class FakeGuest:
    def __init__(self, uuid, vcpus, vm_class='lc', channel=True, acks=True):
        self.info = base.Guest(uuid, 'name-' + uuid, vcpus, vm_class,
                               frozenset(range(64)), frozenset(range(64)),
                               channel)
        self.acks = acks
        self.online = vcpus
        self.target_seq = 0
        self.acked_seq = 0
        self.vcpu_pins = None
        # Each vCPU's pins when they differ (libvirt pins vCPUs one by
        # one: a call cut short leaves a mix); None: all on vcpu_pins.
        self.vcpu_sets = None
        self.emulator_pins = None
        self.util = 50.0
        self.sf = 1000.0
        self.lie = False
        # Guest software's latency (us; None: none published), a new
        # report each observation while latency_live.
        self.latency_us = None
        self.latency_live = True
        self.latency_seq = 0
        self.cpu_ns = self.slices = self.emu_ns = self.count = 0


class FakeDriver(base.HypervisorDriver):
    def __init__(self, cores=8, threads=2):
        self.siblings = tuple(tuple(c + t * cores for t in range(threads))
                              for c in range(cores))
        self.all = {}
        self.pending_events = []
        self.calls = []
        self.clock = 0.0
        self.fail_pin = set()
        self.fault = None         # (uuid, kind, cpus) -> None|before|after
        self.before_pin = []      # checks of the state between two pins
        self.idle = set()         # guests whose vCPUs are at idle priority
        self.fail_idle = set()    # guests whose priority cannot be set
        self.hung = set()         # guests whose calls do not return
        # Running domains not adopted: uuid -> (vCPU pin sets, emulator
        # pins), or None when their pins cannot be read.
        self.unadopted = {}

    def add(self, guest):
        self.all[guest.info.uuid] = guest
        return guest

    # -- interface -------------------------------------------------------
    def host_cpus(self):
        cpus = frozenset(c for group in self.siblings for c in group)
        return base.HostCpus(self.siblings, {}, cpus)

    def guests(self):
        return [g.info for g in self.all.values()]

    def events(self):
        out, self.pending_events = self.pending_events, []
        return out

    def busy_guests(self):
        return frozenset(self.hung)

    def unadopted_pins(self):
        return dict(self.unadopted)

    def observe(self, uuid):
        guest = self._get(uuid)
        if uuid in self.hung:
            raise base.DriverError('observe skipped: a call hangs')
        online = guest.online
        util = min(guest.util, 100.0 * online)
        guest.cpu_ns += int(util * 1e7)
        guest.slices += int(guest.sf)
        guest.emu_ns += int(util * 0.2 * 1e7)
        guest.count += 1
        report = None
        if guest.info.has_channel:
            claimed = util * (5 if guest.lie else 1)
            latency = None
            if guest.latency_us is not None:
                guest.latency_seq += guest.latency_live
                latency = (guest.latency_us, guest.latency_seq)
            report = fake_guest_report(claimed, guest.sf, online, guest.count,
                                       latency)
        return base.Observation(self.clock, guest.cpu_ns, 0, guest.slices,
                                guest.emu_ns, report,
                                emulator_wait_ns=guest.emu_ns // 4)

    def pin_vcpus(self, uuid, cpus):
        self._pin(uuid, 'vcpu', cpus)

    def pin_emulator(self, uuid, cpus):
        self._pin(uuid, 'emulator', cpus)

    def _pin(self, uuid, kind, cpus):
        guest = self._get(uuid)
        for check in self.before_pin:
            check()
        if uuid in self.hung:
            raise base.GuestBusy('pin skipped: a call hangs')
        fault = self.fault(uuid, kind, cpus) if self.fault else None
        if (kind == 'vcpu' and uuid in self.fail_pin) or fault == 'before':
            raise base.DriverError('pin failed')
        if kind == 'vcpu':
            guest.vcpu_pins = frozenset(cpus)
            guest.vcpu_sets = None
        else:
            guest.emulator_pins = frozenset(cpus)
        self.calls.append(('pin_' + ('vcpus' if kind == 'vcpu'
                                     else 'emulator'), uuid,
                           frozenset(cpus)))
        if fault == 'after':
            # Applied, yet reported as failed (a timeout after the fact).
            raise base.DriverError('pin reported failed')
        self.check_isolation()

    def set_vcpus_idle(self, uuid, idle):
        self._get(uuid)
        if uuid in self.fail_idle:
            raise base.DriverError('cpu.idle: permission denied')
        self.calls.append(('idle', uuid, bool(idle)))
        if idle:
            self.idle.add(uuid)
        else:
            # From now on its pins must be its own pool's.
            self.idle.discard(uuid)
            for check in self.before_pin:
                check()
            self.check_isolation()

    def set_vcpu_target(self, uuid, vcpus):
        guest = self._get(uuid)
        guest.target_seq += 1
        self.calls.append(('target', uuid, vcpus))
        if guest.acks:
            guest.online = vcpus
            guest.acked_seq = guest.target_seq
        return guest.target_seq

    def acknowledged(self, uuid, seq):
        return self._get(uuid).acked_seq >= seq

    def read_pins(self, uuid):
        guest = self._get(uuid)
        return (frozenset(guest.vcpu_sets or [guest.vcpu_pins]),
                guest.emulator_pins)

    def heartbeat(self):
        self.calls.append(('heartbeat',))

    def release(self, uuid):
        guest = self._get(uuid)
        guest.online = guest.info.vcpus
        guest.vcpu_pins = guest.info.restore_vcpu_cpus
        guest.vcpu_sets = None
        guest.emulator_pins = guest.info.restore_emulator_cpus
        self.calls.append(('release', uuid))

    def forget(self, uuid):
        self.calls.append(('forget', uuid))

    # -- helpers -------------------------------------------------------------
    def _get(self, uuid):
        try:
            return self.all[uuid]
        except KeyError:
            raise base.DriverError('no guest %s' % uuid)

    def exclusive_sets(self):
        """vCPU pin sets that must not overlap (guests on own cores).

        Guests at idle priority may run anywhere: they take nothing.
        """
        sets = {}
        for uuid, guest in self.all.items():
            if guest.vcpu_pins is not None and uuid not in self.idle:
                sets[uuid] = guest.vcpu_pins
        return sets

    def check_isolation(self):
        """Assert isolation.

        No two guests with distinct pin sets may share a CPU, and no guest
        may share a CPU with the emulator pool.
        """
        emulator = set()
        for guest in self.all.values():
            if guest.emulator_pins:
                emulator |= guest.emulator_pins
        seen = {}
        for uuid, cpus in self.exclusive_sets().items():
            for other, other_cpus in seen.items():
                if cpus != other_cpus and cpus & other_cpus:
                    raise AssertionError('%s and %s share CPUs %s' % (
                        uuid, other, sorted(cpus & other_cpus)))
            seen[uuid] = cpus
            if self.strict_emulator and cpus & emulator:
                raise AssertionError('%s shares CPUs %s with emulators' % (
                    uuid, sorted(cpus & emulator)))

    strict_emulator = False


def ticking_agent(driver, store=None):
    """(agent, tick): the real Agent over ``driver`` on a manual clock.

    Each ``tick()`` advances the agent's clock and the driver's by one
    second, then runs one tick.
    """
    clock = [100.0]
    agent = loop.Agent(driver, frozenset(c for g in driver.siblings
                                         for c in g),
                       ControllerConfig(), settings_mod.AgentSettings(),
                       store=store, clock=lambda: clock[0])

    def tick():
        clock[0] += 1.0
        driver.clock = clock[0]
        return agent.tick()
    return agent, tick


def record_outcomes(agent):
    """The list each of the enforcer's outcomes is appended to."""
    outcomes = []
    apply = agent.enforcer.apply

    def recorded(*args):
        outcomes.append(apply(*args))
        return outcomes[-1]
    agent.enforcer.apply = recorded
    return outcomes
