"""The soak as a Hypothesis state machine over :class:`.world.World`.

Each rule changes the host (a guest appears, pauses, resizes, migrates,
loses a vCPU; a libvirt call fails, hangs or fails half-way through a
plan; a page lies or is truncated; the agent stops, crashes or starts)
and then lets one second pass, with an agent tick if an agent runs.
After every step the checker's findings fail the example
(:data:`.world.VIOLATIONS`, one exception class each, so that Hypothesis
shrinks each kind of failure on its own). At the end every hang and
fault is cleared, the agent stops and ``--restore`` runs: every guest
must be back on its definition with a target of all its vCPUs.

Guests are chosen by an index taken modulo the guests that fit the rule,
so that examples shrink towards the first guest.
"""

import hypothesis
from hypothesis import stateful
from hypothesis import strategies as st

from ufo_agent.channel import layout
from ufo_agent.tests.soak import world as world_mod

PICK = st.integers(0, 15)
SMALL = st.integers(1, 4)

# Kinds of injection a run can leave out (the runner's --disable).
KINDS = ('exceptions', 'hangs', 'paused-hangs', 'libvirtd', 'lifecycle',
         'migration', 'hotplug', 'lies', 'nic', 'truncation', 'restarts',
         'state', 'vhost')
DISABLED = set()

GUEST = st.fixed_dictionaries({
    'vcpus': st.integers(1, 4),
    'iothreads': st.integers(0, 1),
    'module': st.sampled_from(('honest', 'honest', 'absent', 'deaf')),
    'demand': st.integers(0, 4),
    # Context switches per busy vCPU-second: best-effort-like or not.
    'switches': st.sampled_from((300, 4000)),
})


def enabled(kind):
    return stateful.precondition(lambda self: kind not in DISABLED)


class SoakMachine(stateful.RuleBasedStateMachine):
    """The real agent on a simulated host under faults; see the module."""

    call_timeout = world_mod.DEFAULT_CALL_TIMEOUT

    def __init__(self):
        super().__init__()
        self.world = None
        self.final_list_failures = 0

    # -- helpers --------------------------------------------------------------
    def _guests(self, managed=True, ready=True, paused=None):
        out = []
        for inc in self.world.incarnations():
            if managed is not None and inc.managed != managed:
                continue
            if ready is not None and inc.ready != ready:
                continue
            if paused is not None and (inc.dom.paused is not None) != paused:
                continue
            out.append(inc)
        return out

    def _pick(self, index, **kwargs):
        guests = self._guests(**kwargs)
        return guests[index % len(guests)] if guests else None

    def _tick(self, n=1):
        for _ in range(n):
            self.world.tick()
            self.world.raise_violations()

    def _boot(self, guest, deliver=True):
        spec = self.world.define(world_mod.SHARED, guest['vcpus'],
                                 guest['iothreads'], guest['module'])
        inc = self.world.boot(spec, deliver)
        inc.demand = min(guest['demand'], guest['vcpus'])
        inc.switches = guest['switches']
        return inc

    # -- start and end --------------------------------------------------------
    @stateful.initialize(guests=st.lists(GUEST, min_size=2, max_size=5),
                         final_list_failures=st.integers(0, 2))
    def setup(self, guests, final_list_failures):
        self.world = world_mod.World(self.call_timeout)
        world_mod.STATS['examples'] += 1
        if 'libvirtd' not in DISABLED:
            self.final_list_failures = final_list_failures
        for guest in guests:
            self._boot(guest)
        for kind, vcpus in ((world_mod.DEDICATED, 2),
                            (world_mod.FOREIGN, 2),
                            (world_mod.OPTOUT, 1)):
            self.world.boot(self.world.define(kind, vcpus))
        self.world.start_agent()

    @stateful.invariant()
    def promises_hold(self):
        if self.world is None:
            return
        world_mod.STATS['steps'] += 1
        self.world.checker.evaluate('after the step')
        self.world.raise_violations()

    def teardown(self):
        world = self.world
        if world is None:
            return
        try:
            if not world.broken:
                self._final_restore()
        finally:
            world.close()

    def _final_restore(self):
        world = self.world
        world.unstick_all('fail')
        world.clear_faults()
        for path in list(world.truncated):
            world.truncated[path] = world.ticks
        world._expire_faults()
        if world.run_ is not None:
            # With libvirt answering, a guest the stop could not release
            # (one that went away unseen) must not need it.
            failed = world.stop_agent()
            world.checker.released(
                [world.incs[u] for u in failed if u in world.incs and
                 world.incs[u].managed and world.incs[u].ready],
                'after the final stop, which could not release it')
        world.raise_violations()
        world.restore_host(self.final_list_failures)
        world.raise_violations()

    # -- time and load --------------------------------------------------------
    @stateful.rule(n=SMALL)
    def tick(self, n):
        self._tick(n)

    @stateful.rule(index=PICK, demand=st.integers(0, 4))
    def set_demand(self, index, demand):
        inc = self._pick(index)
        if inc is not None:
            inc.demand = min(demand, inc.spec.vcpus)
        self._tick()

    # -- lifecycle ------------------------------------------------------------
    @stateful.precondition(lambda self: len(self._guests(ready=None)) < 7)
    @enabled('lifecycle')
    @stateful.rule(guest=GUEST, deliver=st.booleans())
    def guest_appears(self, guest, deliver):
        self._boot(guest, deliver)
        self._tick()

    @enabled('lifecycle')
    @stateful.rule(index=PICK, deliver=st.booleans())
    def guest_pauses(self, index, deliver):
        inc = self._pick(index, paused=False)
        if inc is not None:
            self.world.pause(inc, deliver)
        self._tick()

    @enabled('lifecycle')
    @stateful.rule(index=PICK, deliver=st.booleans())
    def guest_resumes(self, index, deliver):
        inc = self._pick(index, paused=True)
        if inc is not None:
            self.world.resume(inc, deliver)
        self._tick()

    @enabled('lifecycle')
    @stateful.rule(index=PICK, deliver=st.booleans())
    def guest_reboots(self, index, deliver):
        inc = self._pick(index)
        if inc is not None:
            self.world.reboot(inc, deliver)
        self._tick()

    @enabled('lifecycle')
    @stateful.rule(index=PICK, undefine=st.booleans(), deliver=st.booleans(),
                   again=st.booleans())
    def guest_vanishes(self, index, undefine, deliver, again):
        """Destroyed (and undefined), or shut off and started again."""
        inc = self._pick(index, ready=None)
        if inc is not None:
            spec = inc.spec
            self.world.stop(inc, undefine=undefine and not again,
                            deliver=deliver)
            if again:
                self.world.boot(spec, deliver)
        self._tick()

    @enabled('lifecycle')
    @stateful.rule(index=PICK, vcpus=st.integers(1, 4),
                   dedicated=st.booleans(), deliver=st.booleans())
    def guest_resized(self, index, vcpus, dedicated, deliver):
        """A Nova resize on this host: a new definition, a new QEMU."""
        inc = self._pick(index)
        if inc is not None:
            spec = inc.spec
            self.world.stop(inc, deliver=deliver)
            spec.vcpus = vcpus
            # Nova writes the new definition anew: a migrated guest's
            # carried one (the source's pins, the channel) is gone.
            spec.carried_pins = None
            if dedicated:
                spec.kind = world_mod.DEDICATED
                spec.iothreads = 0
                spec.vcpus = 2
            new = self.world.boot(spec, deliver)
            new.demand = min(inc.demand, new.spec.vcpus)
            new.switches = inc.switches
        self._tick()

    @enabled('migration')
    @stateful.rule(index=PICK, deliver=st.booleans())
    def guest_migrates_out(self, index, deliver):
        inc = self._pick(index)
        if inc is not None:
            if deliver:
                self.world.hv.fire(
                    inc.dom, world_mod.lv.VIR_DOMAIN_EVENT_SUSPENDED,
                    world_mod.lv.VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED)
            self.world.stop(inc, undefine=True, deliver=deliver,
                            migrated=True)
        self._tick()

    @stateful.precondition(lambda self: len(self._guests(ready=None)) < 7)
    @enabled('migration')
    @stateful.rule(guest=GUEST, pins=st.sets(st.integers(0, 11), min_size=1,
                                             max_size=6),
                   online=st.integers(1, 4), seq=st.integers(1, 3))
    def guest_migrates_in(self, guest, pins, online, seq):
        """Arrives paused, on the source's CPU numbers, with its page."""
        spec = self.world.define(world_mod.SHARED, guest['vcpus'],
                                 guest['iothreads'], guest['module'],
                                 carried_pins=frozenset(pins))
        inc = self.world.boot(spec, migrating_pins=frozenset(pins),
                              migrating_page=(online, seq))
        inc.demand = min(guest['demand'], spec.vcpus)
        inc.switches = guest['switches']
        self._tick()

    @enabled('migration')
    @stateful.rule(index=PICK, deliver=st.booleans())
    def migration_completes(self, index, deliver):
        inc = self._pick(index, ready=False)
        if inc is not None:
            self.world.migration_done(inc, deliver)
        self._tick()

    @enabled('hotplug')
    @stateful.rule(index=PICK, replug_after=st.integers(0, 3))
    def vcpu_hotplug(self, index, replug_after):
        """A vCPU unplugged; plugged back (a new thread) some ticks later."""
        inc = self._pick(index)
        if inc is not None and self.world.unplug(inc):
            self._tick(replug_after)
            if inc.running:
                self.world.plug(inc)
        self._tick()

    # -- libvirt failing ------------------------------------------------------
    @enabled('exceptions')
    @stateful.rule(index=PICK, method=st.sampled_from(
        world_mod.FAULT_METHODS + ('pinVcpuFlags', 'pinEmulator')),
                   script=st.lists(st.sampled_from(
                       ('ok', 'fail', 'fail', 'apply-fail')), min_size=1,
                       max_size=4), ticks=SMALL)
    def calls_fail(self, index, method, script, ticks):
        """The next calls of one method succeed or fail as scripted.

        ``ok`` then ``fail`` on pinVcpuFlags is a plan applied half-way.
        """
        inc = self._pick(index, ready=None)
        if inc is not None:
            inc.dom.script[method].extend(script)
            inc.dom.fault_until = self.world.ticks + ticks
        self._tick()

    @enabled('hangs')
    @stateful.rule(index=PICK, method=st.sampled_from(
        ('pinVcpuFlags', 'pinEmulator', 'pinIOThread', 'ioThreadInfo')),
        before=st.integers(0, 2), hold=st.integers(1, 12),
        late=st.sampled_from(('apply', 'fail')))
    def qemu_hangs(self, index, method, before, hold, late):
        """A call (after ``before`` good ones) waits for a stuck QEMU.

        Its job stays stuck for ``hold`` ticks; then the waiting calls
        land (``apply``) or fail.
        """
        inc = self._pick(index, paused=False)
        if inc is not None and inc.dom.stuck is None:
            inc.dom.script[method].extend(['ok'] * before + ['hang'])
            inc.dom.late = late
            inc.dom.stuck_until = inc.dom.fault_until = \
                self.world.ticks + hold
        self._tick()

    @enabled('paused-hangs')
    @stateful.rule(index=PICK, hold=st.integers(1, 12),
                   late=st.sampled_from(('apply', 'fail')))
    def paused_guest_hangs(self, index, hold, late):
        """A guest paused, and its QEMU's job stuck."""
        inc = self._pick(index)
        if inc is not None and inc.dom.stuck is None:
            if inc.dom.paused is None:
                self.world.pause(inc)
            inc.dom.script['pinVcpuFlags'].append('hang')
            inc.dom.late = late
            inc.dom.stuck_until = inc.dom.fault_until = \
                self.world.ticks + hold
        self._tick()

    @enabled('libvirtd')
    @stateful.rule(kind=st.sampled_from(('list', 'lookup', 'open', 'hang')),
                   count=SMALL, ticks=SMALL)
    def libvirtd_fails(self, kind, count, ticks):
        world = self.world
        lv = world_mod.lv
        if kind == 'list':
            world.list_script.extend(['fail'] * count)
        elif kind == 'lookup':
            world.hv.lookup_error = lv.libvirtError(
                'internal error: client socket is closed')
        elif kind == 'open':
            world.hv.open_error = lv.libvirtError(
                'Failed to connect socket to '
                '\'/var/run/libvirt/libvirt-sock\': Connection refused')
        elif world.libvirtd_stuck is None:
            world.libvirtd_stuck = world_mod.threading.Event()
            world.libvirtd_hold = world.ticks + ticks
        world.conn_fault_until = max(world.conn_fault_until,
                                     world.ticks + ticks)
        self._tick()

    # -- what guests write ----------------------------------------------------
    @enabled('lies')
    @stateful.rule(index=PICK, mode=st.sampled_from(world_mod.MODULE_MODES))
    def module_behaves(self, index, mode):
        inc = self._pick(index, ready=None)
        if inc is not None and inc.module is not None:
            inc.module.mode = mode
            inc.spec.module = mode
        self._tick()

    @enabled('lies')
    @stateful.rule(index=PICK, where=st.sampled_from(('guest', 'host',
                                                     'anywhere')),
                   offset=st.integers(0, 4095),
                   data=st.binary(min_size=1, max_size=128))
    def page_lies(self, index, where, offset, data):
        """Hostile bytes in the page: the guest area, the host's, any."""
        inc = self._pick(index, ready=None)
        if inc is not None:
            if where == 'guest':
                offset = layout.GUEST_OFFSET + offset % layout.GUEST_SIZE
            elif where == 'host':
                offset = layout.HOST_OFFSET + offset % layout.HOST_SIZE
            self.world.write_page(inc, offset, data)
        self._tick()

    @enabled('truncation')
    @stateful.rule(index=PICK, size=st.sampled_from((0, 64, 200, 4095)),
                   hold=SMALL)
    def page_truncated(self, index, size, hold):
        """A process of QEMU's user truncates the page for a while."""
        inc = self._pick(index)
        if inc is not None:
            self.world.truncate_page(inc, size, hold)
        self._tick()

    @enabled('nic')
    @stateful.rule(index=PICK, packets=st.sampled_from((0, 200, 5000)),
                   odd=st.booleans())
    def nic_traffic(self, index, packets, odd):
        """Traffic on the guest's NIC from now on.

        ``odd``: the guest sends packets without bytes (libvirt counts
        from the guest's side).
        """
        inc = self._pick(index)
        if inc is not None:
            inc.nic = (packets, 800, 0 if odd else 1200)
        self._tick()

    @enabled('vhost')
    @stateful.rule(index=PICK)
    def vhost_impostor(self, index):
        inc = self._pick(index)
        if inc is not None:
            self.world.add_impostor(inc)
        self._tick()

    # -- the agent's life -----------------------------------------------------
    @stateful.precondition(lambda self: self.world.run_ is not None)
    @enabled('restarts')
    @stateful.rule(how=st.sampled_from(('stop', 'crash')),
                   restore=st.booleans(), down=st.integers(0, 8),
                   list_failures=st.integers(0, 2))
    def agent_restarts(self, how, restore, down, list_failures):
        """The agent stops (SIGTERM) or dies (SIGKILL), and starts again.

        systemd's ExecStopPost runs ``--restore`` (or cannot); ``down``
        seconds later the agent starts again over the same host.

        After a stop every guest it released is checked at once.
        """
        if how == 'stop':
            self.world.stop_agent()
        else:
            self.world.crash_agent()
        self.world.raise_violations()
        if restore:
            if 'libvirtd' in DISABLED:
                list_failures = 0
            self.world.restore_host(list_failures)
            self.world.raise_violations()
        self._tick(down)
        self.world.start_agent()
        self._tick()

    @stateful.precondition(lambda self: self.world.run_ is None)
    @stateful.rule()
    def agent_starts(self):
        """After a start that failed (libvirtd refused the connection)."""
        self.world.start_agent()
        self._tick()

    @enabled('state')
    @stateful.rule(index=PICK, kind=st.sampled_from(('nested', 'infinity',
                                                     'garbage')))
    def state_file_corrupt(self, index, kind):
        """A guest's learned state on disk is damaged; the agent restarts."""
        inc = self._pick(index)
        if inc is not None:
            self.world.corrupt_state(inc, kind)
            if self.world.run_ is not None:
                self.world.crash_agent()
                self.world.start_agent()
        self._tick()


def settings(examples, steps, shrink=True, **kwargs):
    """Hypothesis settings of a soak run: no database, no deadline.

    Without ``shrink`` a failure is reported as found (the whole run of
    steps), at once.
    """
    phases = [hypothesis.Phase.explicit, hypothesis.Phase.reuse,
              hypothesis.Phase.generate]
    if shrink:
        phases.append(hypothesis.Phase.shrink)
    return hypothesis.settings(
        max_examples=examples, stateful_step_count=steps, deadline=None,
        database=None, suppress_health_check=list(hypothesis.HealthCheck),
        phases=phases, **kwargs)


def machine_for(seed, call_timeout=None):
    """The state machine with a fixed seed (and a call deadline)."""
    attrs = {}
    if call_timeout is not None:
        attrs['call_timeout'] = call_timeout
    machine = type('SoakMachine', (SoakMachine,), attrs)
    return hypothesis.seed(seed)(machine)


def run(seed, examples, steps, call_timeout=None, shrink=True, **kwargs):
    """Run ``examples`` examples of at most ``steps`` steps from ``seed``."""
    stateful.run_state_machine_as_test(
        machine_for(seed, call_timeout),
        settings=settings(examples, steps, shrink, **kwargs))
