"""Failing examples the full soak found, kept as they were found.

Each is the Hypothesis example ``python -m ufo_agent.tests.soak``
printed, shrunk by hand to the steps that still fail, run over the
soak's world with a call deadline long enough for a loaded machine.
"""

from ufo_agent.tests.soak import machine
from ufo_agent.tests.unit.service import test_fault_soak


class _Machine(machine.SoakMachine):
    call_timeout = test_fault_soak.SCENARIO_CALL_TIMEOUT


def _guest(vcpus, module='honest', demand=0, iothreads=0,
           switches=300):
    return {'vcpus': vcpus, 'module': module, 'demand': demand,
            'iothreads': iothreads, 'switches': switches}


def test_a_pin_cut_short_narrows_only_where_every_thread_may_run():
    # Seed 14 of the full soak (10,000 ticks from seed 7). A guest's
    # pin from its own cores to the idle pool hangs after its first
    # vCPU and lands late: its vCPUs end up split over both sets. The
    # ledger kept the union as where every thread had been seen, so
    # a later plan giving the guest cores in the union "narrowed" the
    # vCPUs on the idle pool onto cores another guest's vCPU still ran
    # on (PoolConflict). Now a narrow keeps only CPUs common to both.
    state = _Machine()
    try:
        state.setup(guests=[_guest(3), _guest(1), _guest(1), _guest(3)],
                    final_list_failures=0)
        state.guest_migrates_in(
            guest=_guest(1, demand=2, iothreads=1, switches=4000),
            online=3, pins={9, 4, 6}, seq=1)
        state.guest_resized(dedicated=True, deliver=True, index=5,
                            vcpus=4)
        state.guest_appears(deliver=True,
                            guest=_guest(1, 'absent', demand=3))
        state.guest_appears(deliver=False,
                            guest=_guest(4, 'deaf', demand=4))
        state.migration_completes(deliver=True, index=12)
        state.state_file_corrupt(index=4, kind='garbage')
        state.qemu_hangs(before=1, hold=4, index=6, late='apply',
                         method='pinVcpuFlags')
        state.tick(n=1)
        state.tick(n=3)
    finally:
        state.teardown()


def test_a_late_narrow_after_a_dead_agents_pin_keeps_its_pool():
    # Seed 14 again, with the fix above. A paused guest's pin hangs;
    # the agent is killed and the next one narrows the guest's vCPU to
    # where it was read, a call that queues behind the dead agent's.
    # Both land at once: the dead agent's moves the thread away, the
    # new one's back to where it was, beside another guest as when it
    # was adopted. The checker had taken the second landing for a move
    # into the guest's own pool (PoolConflict on CPU 2); the new
    # agent's ledger had rightly held it as a narrow of an unknown pin.
    state = _Machine()
    try:
        state.setup(guests=[_guest(3), _guest(1), _guest(1), _guest(3)],
                    final_list_failures=0)
        state.guest_migrates_in(
            guest=_guest(4, demand=3, iothreads=1), online=2,
            pins={0, 4, 8, 9, 10, 11}, seq=1)
        state.guest_appears(deliver=False,
                            guest=_guest(3, demand=4, iothreads=1))
        state.guest_appears(deliver=True,
                            guest=_guest(1, demand=1, iothreads=1))
        state.migration_completes(deliver=True, index=9)
        state.set_demand(demand=1, index=8)
        state.agent_restarts(down=0, how='stop', list_failures=1,
                             restore=False)
        state.paused_guest_hangs(hold=10, index=14, late='apply')
        state.guest_resumes(deliver=True, index=5)
        state.libvirtd_fails(count=4, kind='list', ticks=4)
        state.libvirtd_fails(count=2, kind='list', ticks=3)
        state.module_behaves(index=1, mode='long-interval')
        state.state_file_corrupt(index=3, kind='infinity')
        state.guest_reboots(deliver=True, index=7)
        state.guest_reboots(deliver=True, index=7)
        state.guest_reboots(deliver=True, index=9)
        state.calls_fail(index=14, method='pinEmulator',
                         script=['apply-fail', 'fail', 'fail'], ticks=3)
        state.libvirtd_fails(count=1, kind='list', ticks=3)
    finally:
        state.teardown()


def test_a_resize_gives_a_migrated_guest_novas_new_definition():
    # Seed 8. A guest that migrated in carries the source's definition
    # (its pins and the channel device); a Nova resize on this host
    # replaces it with one Nova writes anew (finish_migration calls
    # _get_guest_xml), without the device. The soak kept the carried
    # one, so the resized QEMU (3 -> 4 vCPUs) mapped the page at boot
    # and its module took the target of every vCPU of the old
    # definition (3), written by the agent that had just started
    # (ShrinkWithoutDecision). Now the resized guest gets the channel
    # from the agent, with its new vCPU count.
    state = _Machine()
    try:
        state.setup(guests=[_guest(4), _guest(4)], final_list_failures=0)
        state.guest_migrates_in(guest=_guest(3), online=3,
                                pins={0, 1, 2, 3}, seq=3)
        state.paused_guest_hangs(hold=3, index=0, late='apply')
        state.migration_completes(deliver=True, index=10)
        state.guest_pauses(deliver=True, index=1)
        state.agent_restarts(down=3, how='stop', list_failures=2,
                             restore=True)
        state.libvirtd_fails(count=3, kind='list', ticks=3)
        state.guest_resized(dedicated=False, deliver=False, index=5,
                            vcpus=4)
        state.guest_resized(dedicated=False, deliver=True, index=10,
                            vcpus=4)
    finally:
        state.teardown()


def test_a_narrow_in_flight_lands_in_the_pool_its_plan_gives():
    # Seed 8, found when the checker gave every pin call landing within
    # the CPUs its thread was on then that thread's label at the time
    # (7e5f55a): a narrow still in flight counted for the vCPU's old
    # pool, kept another guest's vCPU out of the idle pool it was
    # joining, and that one's old label clashed (PoolConflict on CPU
    # 11). Only a narrow that comes back after another call moved the
    # thread keeps the earlier pool; one in flight lands in its plan's.
    state = _Machine()
    try:
        state.setup(guests=[_guest(4), _guest(4)], final_list_failures=0)
        state.guest_pauses(deliver=True, index=0)
        state.guest_migrates_in(guest=_guest(4, demand=3, switches=4000),
                                online=1, pins={0, 1, 2, 3, 4, 5}, seq=1)
        state.guest_resized(dedicated=True, deliver=True, index=13,
                            vcpus=4)
        state.set_demand(demand=2, index=0)
        state.migration_completes(deliver=False, index=11)
        state.guest_migrates_in(guest=_guest(3), online=3,
                                pins={0, 1, 2, 3}, seq=3)
        state.migration_completes(deliver=False, index=0)
        state.guest_resumes(deliver=False, index=0)
        state.vhost_impostor(index=0)
        state.qemu_hangs(before=0, hold=1, index=15, late='apply',
                         method='pinVcpuFlags')
        state.paused_guest_hangs(hold=5, index=4, late='apply')
        state.guest_resumes(deliver=False, index=0)
        state.paused_guest_hangs(hold=11, index=0, late='apply')
        state.guest_pauses(deliver=True, index=9)
    finally:
        state.teardown()


def test_guests_found_over_the_idle_cpus_are_placed():
    # Seed 116 (30,000 ticks from seed 100), shrunk to 23 steps. After
    # libvirt failures and hung pins, two guests are found with their
    # vCPUs on different sets (pins cut short), each over the idle CPUs
    # and over where the other was seen, both bound for the idle pool;
    # a migrated guest waits for their CPUs. Each waited for the other
    # and the migrated guest stayed unplaced beside the shared pool
    # (UnplacedThread). Now each first narrows off the idle CPUs to
    # where all its vCPUs were seen, and they enter the idle pool.
    state = _Machine()
    try:
        state.setup(guests=[_guest(3), _guest(2)], final_list_failures=0)
        state.paused_guest_hangs(hold=5, index=15, late='apply')
        state.guest_appears(deliver=False, guest=_guest(
            3, demand=4, iothreads=1, switches=4000))
        state.guest_appears(deliver=True, guest=_guest(2, 'deaf', demand=3))
        state.guest_resized(dedicated=True, deliver=False, index=4,
                            vcpus=2)
        state.guest_vanishes(again=True, deliver=False, index=10,
                             undefine=True)
        state.state_file_corrupt(index=4, kind='nested')
        state.guest_appears(deliver=False, guest=_guest(4))
        state.guest_migrates_out(deliver=True, index=12)
        state.guest_migrates_in(guest=_guest(3, demand=4, switches=4000),
                                online=4, pins={1, 3, 4, 5, 9, 11}, seq=1)
        state.paused_guest_hangs(hold=8, index=5, late='apply')
        state.guest_reboots(deliver=False, index=4)
        state.libvirtd_fails(count=2, kind='list', ticks=4)
        state.libvirtd_fails(count=4, kind='lookup', ticks=1)
        state.paused_guest_hangs(hold=9, index=1, late='fail')
        state.nic_traffic(index=3, odd=True, packets=200)
        state.libvirtd_fails(count=2, kind='list', ticks=4)
        state.migration_completes(deliver=True, index=9)
        state.guest_migrates_out(deliver=False, index=1)
        state.calls_fail(index=5, method='pinVcpuFlags', script=['fail'],
                         ticks=1)
        state.module_behaves(index=14, mode='rewrite')
        state.migration_completes(deliver=False, index=14)
        state.module_behaves(index=4, mode='rewrite')
        state.page_lies(data=b'\x12\x14#', index=10, offset=428,
                        where='guest')
    finally:
        state.teardown()
