"""The sharing-cost mechanisms each do what their docs say, alone."""

import dataclasses

import numpy as np
import pytest

from ufo_sim.engine import HostSpec
from ufo_sim.engine import SimHost
from ufo_sim.engine.spec import scaled
from ufo_sim import profiles

MC = profiles.MEMCACHED
EIGHT_WORKERS = profiles.with_options(MC, [('memcached.threads', 8)])
OFF = dict(cache_refill=0.0, emu_wakeup=0.0, irq_inject=0.0,
           smt_cross_slowdown=1.5, smt_emu_slowdown=1.5, guest_locks=False,
           guest_migration_cost=0.0)


def _spec(cores, smt, **on):
    return dataclasses.replace(HostSpec(cores=cores, smt=smt),
                               **dict(OFF, **on))


def _vm_cpu_per_request(spec, vms, cpus, emulator_cpus, load=0.3,
                        profile=MC, seconds=20.0, batch_beside=False,
                        vcpus=4):
    """Per LC VM: (guest busy, emulator CPU) per request, in ns."""
    host = SimHost(spec, seed=3)
    names = [host.add_vm('vm%d' % i, vcpus, profile,
                         rps=profile.max_rps * load / vms)
             for i in range(vms)]
    for vm in names:
        host.pin_vcpus(vm, cpus)
        host.pin_emulator(vm, emulator_cpus)
        host.set_online(vm, vcpus)
    if batch_beside:
        be = host.add_vm('be', 1, profiles.BE(1))
        host.pin_vcpus(be, cpus)
        host.pin_emulator(be, emulator_cpus)
    host.advance(2.0)
    before = {vm: host.counters(vm) for vm in names}
    host.advance(seconds)
    out = []
    for vm in names:
        a, b = before[vm], host.counters(vm)
        done = b.requests_done - a.requests_done
        out.append(((b.guest_busy_ns - a.guest_busy_ns) / done,
                    (b.emulator_cpu_ns - a.emulator_cpu_ns) / done))
    return out


def test_cache_refill_costs_only_where_another_vm_ran():
    refill = HostSpec().cache_refill

    def busy(batch_beside, **on):
        return _vm_cpu_per_request(_spec(2, 1, **on), 1, [0], [1],
                                   load=0.02, batch_beside=batch_beside,
                                   vcpus=1)[0][0]

    # One vCPU on a core of its own: its caches stay warm.
    assert busy(False, cache_refill=refill) < 1.05 * busy(False)
    # A batch VM runs between its requests: each comes back to a cold
    # cache and works slower until it has refilled it.
    assert busy(True, cache_refill=refill) > 1.3 * busy(True)


def test_a_guests_own_vcpus_evict_its_vpid_tagged_warmth():
    refill = HostSpec().cache_refill

    def busy(vcpus, **on):
        return _vm_cpu_per_request(_spec(2, 1, cache_refill=refill, **on),
                                   1, [0], [1], load=0.1, vcpus=vcpus)[0][0]

    # Two vCPUs of one guest take turns on one CPU: they share the
    # guest's cache lines, but each one's TLB entries carry its own VPID.
    assert busy(2, vcpu_tlb_share=1.0) > 1.1 * busy(2)
    # A vCPU alone on its CPU comes back to its own entries.
    assert busy(1, vcpu_tlb_share=1.0) == busy(1)


def test_emulator_wakeup_costs_each_thread_woken():
    wakeup = scaled(5e-6)
    host = SimHost(_spec(2, 1, emu_wakeup=wakeup), seed=3)
    # Eight connections over the four vhost queues: the engine ties a
    # connection to a worker, and a 1-vCPU Memcached's one worker would
    # put every packet on one queue.
    vm = host.add_vm('vm', 1, EIGHT_WORKERS, rps=MC.max_rps * 0.1)
    host.pin_vcpus(vm, [0])
    host.pin_emulator(vm, [1])
    host.advance(20.0)
    woken = host.counters(vm)
    base = _vm_cpu_per_request(_spec(2, 1), 1, [0], [1], load=0.1,
                               profile=EIGHT_WORKERS, vcpus=1)[0][1]
    extra = woken.emulator_cpu_ns / woken.requests_done - base
    # At low load nearly every packet, in and out, finds its worker
    # asleep: up to two wake-ups a request, each costing its time.
    wakes = woken.emulator_wakes / woken.requests_done
    assert 1.5 < wakes <= 2.0
    assert extra == pytest.approx(wakes * wakeup * 1e9, rel=0.15)


def _irqs_per_request(cpus, load, **on):
    host = SimHost(_spec(4, 1, irq_inject=scaled(1e-6), **on), seed=3)
    vm = host.add_vm('vm', 4, MC, rps=MC.max_rps * load)
    host.pin_vcpus(vm, cpus)
    host.pin_emulator(vm, [3])
    host.advance(10.0)
    c = host.counters(vm)
    return c.irqs / c.requests_done


def test_interrupt_injected_only_while_the_queue_interrupt_is_enabled():
    # One interrupt a packet without NAPI and the event index.
    assert _irqs_per_request([0, 1, 2], 0.3, irq_coalesce=False) == \
        pytest.approx(1.0, abs=0.01)
    # Idle vCPUs take every packet's interrupt at once...
    assert _irqs_per_request([0, 1, 2], 0.05) > 0.9
    # ... four vCPUs on one CPU leave the queue's handler pending while
    # its vCPU waits: the packets that come meanwhile raise none.
    assert _irqs_per_request([0], 0.3) < 0.8


def _wakes_per_request(**on):
    host = SimHost(_spec(8, 1, emu_wakeup=scaled(1e-6), **on), seed=3)
    vm = host.add_vm('vm', 4, MC, rps=MC.max_rps * 0.3)
    host.pin_vcpus(vm, [0, 1, 2, 3])
    host.pin_emulator(vm, [4, 5, 6, 7])
    host.advance(10.0)
    c = host.counters(vm)
    return c.emulator_wakes / c.requests_done


def test_vhost_workers_per_queue_batch_their_wakeups():
    # A packet for a busy worker waits in its queue; a shared queue wakes
    # another thread for it while any sleeps.
    assert _wakes_per_request(emu_queues=True) < \
        0.9 * _wakes_per_request(emu_queues=False)


def _be_chunks(spec, same_vm, emulator_sibling=False, emu_sensitivity=1.0):
    host = SimHost(spec, seed=5)
    a = host.add_vm('a', 1, dataclasses.replace(
        profiles.BE(1), smt_emu_sensitivity=emu_sensitivity))
    host.pin_vcpus(a, [0])
    host.pin_emulator(a, [2, 3])
    if emulator_sibling:
        mc = host.add_vm('mc', 1, MC, rps=MC.max_rps * 4)
        host.pin_vcpus(mc, [2])
        host.pin_emulator(mc, [1])
    else:
        b = a if same_vm else host.add_vm('b', 1, profiles.BE(1))
        if not same_vm:
            host.pin_vcpus(b, [1])
            host.pin_emulator(b, [2, 3])
    host.advance(10.0)
    return host.counters(a).requests_done


def test_smt_slowdown_depends_on_what_runs_on_the_sibling():
    same = _be_chunks(_spec(2, 2, smt_cross_slowdown=2.0), same_vm=False)
    base = _be_chunks(_spec(2, 2), same_vm=False)
    assert same < 0.85 * base          # another VM on the sibling
    emu = _be_chunks(_spec(2, 2, smt_emu_slowdown=2.5),
                     same_vm=False, emulator_sibling=True)
    emu_base = _be_chunks(_spec(2, 2), same_vm=False, emulator_sibling=True)
    assert emu < emu_base              # an emulator thread on the sibling


def test_an_emulator_sibling_slows_a_sensitive_guest_more():
    spec = _spec(2, 2)
    plain = _be_chunks(spec, same_vm=False, emulator_sibling=True)
    sensitive = _be_chunks(spec, same_vm=False, emulator_sibling=True,
                           emu_sensitivity=3.0)
    # 1 + 0.5 x 3 = 2.5 times slower beside it, not 1.5, while it runs.
    assert sensitive < 0.9 * plain
    # Only an emulator thread on the sibling: another guest's vCPU slows
    # it as much as anyone.
    assert (_be_chunks(spec, same_vm=False, emu_sensitivity=3.0) ==
            _be_chunks(spec, same_vm=False))


def _mysql_p99(spec, cpus):
    """MySQL's p99 at half its max load, the mean over three seeds."""
    p99 = []
    for seed in (7, 8, 9):
        host = SimHost(spec, seed=seed)
        vm = host.add_vm('db', 8, profiles.MYSQL,
                         rps=profiles.MYSQL.max_rps * 0.5)
        host.pin_vcpus(vm, cpus)
        host.pin_emulator(vm, [8, 9, 10, 11])
        host.advance(5.0)
        host.take_latencies(vm)
        host.advance(30.0)
        p99.append(np.percentile(host.take_latencies(vm), 99))
    return float(np.mean(p99))


def test_a_lock_holder_preempted_on_the_host_stalls_the_waiters():
    locks = _spec(6, 2, guest_locks=True)
    nolocks = _spec(6, 2)
    # Eight vCPUs on four CPUs: holders get preempted, waiters spin.
    assert (_mysql_p99(locks, range(4)) >
            1.3 * _mysql_p99(nolocks, range(4)))
    # A CPU per vCPU: nobody is preempted, the lock costs little.
    assert (_mysql_p99(locks, range(8)) <
            1.15 * _mysql_p99(nolocks, range(8)))


def _mysql_busy_per_request(spec):
    host = SimHost(spec, seed=7)
    vm = host.add_vm('db', 8, profiles.MYSQL,
                     rps=profiles.MYSQL.max_rps * 0.5)
    host.pin_vcpus(vm, range(4))
    host.pin_emulator(vm, [8, 9, 10, 11])
    host.advance(5.0)
    a = host.counters(vm)
    host.advance(20.0)
    b = host.counters(vm)
    host.check()
    return ((b.guest_busy_ns - a.guest_busy_ns) /
            (b.requests_done - a.requests_done))


def test_lock_waiters_spin_then_sleep():
    # Spinning burns guest CPU; a waiter that sleeps at once burns none,
    # and neither stalls the host (check() passes, requests complete).
    long_spin = _spec(6, 2, guest_locks=True, lock_spin=scaled(1e-3))
    no_spin = _spec(6, 2, guest_locks=True, lock_spin=0.0)
    assert (_mysql_busy_per_request(long_spin) >
            1.1 * _mysql_busy_per_request(no_spin))


def _beside_a_poller(spec):
    """Batch chunks on CPU 0 beside a one-vCPU Memcached VM on CPU 1.

    At this load its vCPU halt-polls for about a third of the time.
    Returns (chunks, Memcached vCPU CPU, its guest busy time), seconds.
    """
    host = SimHost(spec, seed=5)
    be = host.add_vm('be', 1, profiles.BE(1))
    host.pin_vcpus(be, [0])
    host.pin_emulator(be, [2, 3])
    mc = host.add_vm('mc', 1, MC, rps=MC.max_rps * 0.1)
    host.pin_vcpus(mc, [1])
    host.pin_emulator(mc, [2, 3])
    host.advance(10.0)
    c = host.counters(mc)
    return (host.counters(be).requests_done, c.vcpu_cpu_ns / 1e9,
            c.guest_busy_ns / 1e9)


def test_a_halt_polling_sibling_barely_slows_the_core():
    chunks, vcpu, busy = _beside_a_poller(_spec(2, 2))
    assert vcpu - busy > 2.0           # seconds of polling in the 10
    # smt_poll_slowdown 1.5 charges the poll loop as work (the model
    # before the PAUSE loop was told apart from work).
    as_work, _, _ = _beside_a_poller(_spec(2, 2, smt_poll_slowdown=1.5))
    assert as_work < 0.9 * chunks


def _shared_nginx(spec, seed=4):
    """Two 4-vCPU Nginx VMs on 3 shared CPUs, 10 s measured.

    Returns (vCPU run delay in s, p99 in us).
    """
    host = SimHost(spec, seed=seed)
    vms = [host.add_vm('v%d' % i, 4, profiles.NGINX,
                       rps=profiles.NGINX.max_rps * 0.15)
           for i in range(2)]
    for vm in vms:
        host.pin_vcpus(vm, [0, 1, 2])
        host.pin_emulator(vm, [3])
    host.advance(1.0)
    before = [host.counters(vm) for vm in vms]
    for vm in vms:
        host.take_latencies(vm)
    host.advance(10.0)
    after = [host.counters(vm) for vm in vms]
    lat = np.concatenate([host.take_latencies(vm) for vm in vms])
    host.check()
    return (sum(b.vcpu_wait_ns - a.vcpu_wait_ns
                for a, b in zip(before, after)) / 1e9,
            float(np.percentile(lat, 99)))


def _queued_behind_one_cpu(seed):
    """Seconds per second two busy vCPUs wait once allowed a second CPU.

    A light emulator on that second CPU wakes up now and then.
    """
    host = SimHost(HostSpec(cores=3, smt=1), seed=seed)
    be = host.add_vm('be', 2, profiles.BE(8))
    host.pin_vcpus(be, [0])
    host.pin_emulator(be, [0])
    lc = host.add_vm('lc', 1, MC, rps=MC.max_rps * 0.1)
    host.pin_vcpus(lc, [2])
    host.pin_emulator(lc, [1])
    host.advance(0.5)
    host.pin_vcpus(be, [0, 1])
    before = host.counters(be)
    host.advance(2.0)
    host.check()
    return (host.counters(be).vcpu_wait_ns - before.vcpu_wait_ns) / 2e9


@pytest.mark.parametrize('seed', [1, 3, 4])
def test_an_idle_cpu_pulls_at_the_tick_after_a_wake_up_came_and_went(seed):
    # CPU 1 is idle three quarters of the time. A pull armed when a vCPU
    # queued on CPU 0 was cleared by the emulator's next wake-up there;
    # without a new pull when CPU 1 went idle again, one vCPU waited on
    # CPU 0 almost all the time (1.0 s/s with seeds 1, 3 and 4).
    assert _queued_behind_one_cpu(seed) < 0.6


@pytest.mark.parametrize('seed', [4, 5])
def test_linux_load_balancing_leaves_cpus_idle_a_while(seed):
    # migration_cost 0 is an ideal balancer: a preempted vCPU moves to an
    # idle CPU at once and an idle CPU takes any queued thread. With
    # Linux's rules (cache-hot threads stay, newly idle CPUs with short
    # idle periods do not pull, idle CPUs pull at the tick) vCPUs wait
    # longer and the tail grows.
    ideal = _shared_nginx(_spec(4, 1, migration_cost=0.0), seed)
    linux = _shared_nginx(_spec(4, 1), seed)
    assert linux[0] > 1.1 * ideal[0]
    assert linux[1] > 1.2 * ideal[1]


def _eight_workers_on_four_vcpus(guest_migration_cost, seed):
    """Memcached's eight workers on four online vCPUs, half its max load.

    Returns (p99 in us, requests done per second).
    """
    spec = HostSpec(cores=8, smt=1,
                    guest_migration_cost=guest_migration_cost)
    host = SimHost(spec, seed=seed)
    vm = host.add_vm('mc', 8, MC, rps=MC.max_rps * 0.5)
    host.pin_vcpus(vm, range(4))
    host.pin_emulator(vm, range(4, 8))
    host.set_online(vm, 4)
    host.advance(1.0)
    before = host.counters(vm)
    host.take_latencies(vm)
    host.advance(4.0)
    lat = host.take_latencies(vm)
    host.check()
    done = host.counters(vm).requests_done - before.requests_done
    return float(np.percentile(lat, 99)), done / 4.0


@pytest.mark.parametrize('seed', [1, 2])
def test_the_guest_balances_its_threads_by_linux_rules(seed):
    # guest_migration_cost 0 balances the guest ideally: a vCPU going
    # idle takes any thread queued on another. With the guest kernel's
    # own rules, workers queued behind a busy vCPU wait for it or for
    # the guest's tick: the same requests get done, with a longer tail
    # (p99 5.5-5.8 against 7.0-7.4 simulated ms, seeds 1-3).
    ideal = _eight_workers_on_four_vcpus(0.0, seed)
    linux = _eight_workers_on_four_vcpus(scaled(0.5e-3), seed)
    assert linux[0] > 1.15 * ideal[0]
    assert linux[1] == pytest.approx(ideal[1], rel=0.01)


def _polling(load, **spec):
    host = SimHost(dataclasses.replace(HostSpec(cores=8, smt=2), **spec),
                   seed=3)
    vm = host.add_vm('vm', 8, MC, rps=MC.max_rps * load)
    host.pin_vcpus(vm, range(8))
    host.pin_emulator(vm, range(8, 16))
    host.advance(1.0)
    a = host.counters(vm)
    host.advance(4.0)
    b = host.counters(vm)
    return {f: getattr(b, f) - getattr(a, f) for f in (
        'vcpu_cpu_ns', 'vcpu_guest_ns', 'vcpu_poll_ns', 'halts',
        'polls_ok', 'guest_busy_ns')}


def test_halt_polling_is_vcpu_thread_time_apart_from_guest_time():
    low = _polling(0.1)
    # KVM charges the poll loop to the vCPU thread (host kernel time):
    # at a tenth of max load, where the vCPUs wake every few tens of
    # real microseconds, it is most of the threads' time.
    assert low['vcpu_poll_ns'] > low['vcpu_guest_ns']
    assert low['vcpu_guest_ns'] + low['vcpu_poll_ns'] < low['vcpu_cpu_ns']
    assert low['guest_busy_ns'] <= low['vcpu_guest_ns']
    assert 0 < low['polls_ok'] < low['halts']
    off = _polling(0.1, halt_poll=0.0)
    assert off['vcpu_poll_ns'] == 0 and off['polls_ok'] == 0
    # Guest time is the guest's work: near proportional to the load,
    # where the threads' whole time is not.
    high = _polling(0.5)
    assert high['vcpu_guest_ns'] / low['vcpu_guest_ns'] == \
        pytest.approx(5, rel=0.15)
    assert high['vcpu_cpu_ns'] / low['vcpu_cpu_ns'] < 4.5
