"""The host model: facade, determinism, and conservation of CPU time."""

import random

import numpy as np
import pytest

from ufo_sim.engine import HostSpec
from ufo_sim.engine import SimHost
from ufo_sim import profiles


def _busy_host(seed=1):
    """Two LC VMs and a BE VM, with pins and hot-unplug mid-run."""
    host = SimHost(HostSpec(cores=4, smt=2), seed=seed)
    a = host.add_vm('a', 4, profiles.MEMCACHED,
                    rps=profiles.MEMCACHED.max_rps * 0.3)
    b = host.add_vm('b', 4, profiles.NGINX, rps=profiles.NGINX.max_rps * 0.3)
    be = host.add_vm('be', 2, profiles.BE(threads=3))
    host.advance(0.4)
    host.pin_vcpus(a, [0, 1, 2])
    host.pin_emulator(a, [3])
    host.set_online(b, 2)
    host.advance(0.3)
    host.pin_vcpus(be, [6, 7])
    host.set_online(b, 4)
    host.set_rps(a, profiles.MEMCACHED.max_rps * 0.5)
    host.advance(0.3)
    return host, (a, b, be)


def test_siblings_and_numa():
    host = SimHost(HostSpec(cores=4, smt=2, numa_nodes=2))
    assert host.siblings == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert host.numa_of_cpu == {0: 0, 1: 0, 2: 0, 3: 0,
                                4: 1, 5: 1, 6: 1, 7: 1}
    assert SimHost(HostSpec(cores=2, smt=1)).siblings == ((0,), (1,))


def test_bad_specs_are_refused():
    with pytest.raises(ValueError):
        HostSpec(smt=4)
    with pytest.raises(ValueError):
        HostSpec(cores=64, smt=2)
    with pytest.raises(ValueError, match='guest_migration_cost'):
        HostSpec(guest_migration_cost=-1.0)
    with pytest.raises(ValueError, match='guest_balance_tick'):
        HostSpec(guest_balance_tick=0.0)
    host = SimHost(HostSpec(cores=2))
    vm = host.add_vm('a', 2, profiles.MEMCACHED)
    with pytest.raises(ValueError):
        host.add_vm('a', 2, profiles.MEMCACHED)
    with pytest.raises(ValueError):
        host.pin_vcpus(vm, [])
    with pytest.raises(KeyError):
        host.counters('nope')


def test_time_and_online_count():
    host = SimHost(HostSpec(cores=2))
    vm = host.add_vm('a', 4, profiles.MEMCACHED)
    assert host.online(vm) == 4
    assert host.set_online(vm, 2) == 2
    assert host.online(vm) == 2
    assert host.set_online(vm, 0) == 1      # one vCPU always stays
    assert host.set_online(vm, 9) == 4
    host.advance(0.25)
    host.advance(0.5)
    assert host.now == pytest.approx(0.75)


def test_same_seed_same_run():
    h1, vms1 = _busy_host(seed=7)
    h2, vms2 = _busy_host(seed=7)
    for v1, v2 in zip(vms1, vms2):
        assert h1.counters(v1) == h2.counters(v2)
        np.testing.assert_array_equal(h1.take_latencies(v1),
                                      h2.take_latencies(v2))
    assert h1.cpu_time() == h2.cpu_time()


def test_other_seed_other_run():
    h1, vms1 = _busy_host(seed=7)
    h2, vms2 = _busy_host(seed=8)
    assert h1.counters(vms1[0]) != h2.counters(vms2[0])


def test_cpu_time_is_conserved():
    host, vms = _busy_host()
    elapsed = round(host.now * 1e9)
    times = host.cpu_time()
    for t in times:
        assert t['busy_ns'] + t['overhead_ns'] + t['idle_ns'] == elapsed
        assert min(t.values()) >= 0
    busy = sum(t['busy_ns'] for t in times)
    overhead = sum(t['overhead_ns'] for t in times)
    used = sum(host.counters(vm).vcpu_cpu_ns +
               host.counters(vm).emulator_cpu_ns for vm in vms)
    # Threads are charged their busy time and the switches into them
    # (and a vCPU its VM exits), all of it spent on some CPU.
    assert busy < used <= busy + overhead
    assert overhead > 0
    assert sum(t['idle_ns'] for t in times) > 0


def test_guest_time_within_vcpu_time():
    host, vms = _busy_host()
    for vm in vms:
        c = host.counters(vm)
        assert 0 < c.guest_busy_ns <= c.vcpu_cpu_ns


def test_latencies_are_taken_once():
    host = SimHost(HostSpec(cores=2))
    vm = host.add_vm('a', 2, profiles.MEMCACHED, rps=500)
    host.advance(0.5)
    lat = host.take_latencies(vm)
    assert len(lat) == host.counters(vm).requests_done > 100
    assert (lat > 0).all()
    assert len(host.take_latencies(vm)) == 0


def test_pins_confine_threads():
    host = SimHost(HostSpec(cores=4))
    vm = host.add_vm('a', 8, profiles.NGINX, rps=profiles.NGINX.max_rps)
    host.pin_vcpus(vm, [0, 1])
    host.pin_emulator(vm, [2])
    host.advance(1.0)
    times = host.cpu_time()
    assert all(t['busy_ns'] == 0 for t in times[3:])
    c = host.counters(vm)
    # three CPUs for a VM that needs more: saturated, never more
    assert c.vcpu_cpu_ns <= 2e9 and c.emulator_cpu_ns <= 1e9
    assert c.vcpu_cpu_ns > 1.9e9


def test_offlined_vcpus_hand_their_threads_over():
    host = SimHost(HostSpec(cores=4))
    vm = host.add_vm('a', 8, profiles.BE(threads=8))
    host.advance(0.5)
    before = host.counters(vm)
    host.set_online(vm, 2)
    host.advance(1.0)
    after = host.counters(vm)
    # 8 CPU-bound threads on 2 online vCPUs: 2 CPUs' worth, all work goes on
    assert after.vcpu_cpu_ns - before.vcpu_cpu_ns == pytest.approx(2e9,
                                                                   rel=0.02)
    assert after.requests_done > before.requests_done


def _p99_share_of_16_vcpu_memcached(profile, seed):
    """p99 / QoS: 16 vCPUs on 16 CPUs of their own, emulator on 4 more."""
    host = SimHost(HostSpec(cores=10, smt=2), seed=seed)
    vm = host.add_vm('a', 16, profile, rps=1.7 * profile.max_rps)
    host.pin_vcpus(vm, range(16))
    host.pin_emulator(vm, range(16, 20))
    host.advance(0.5)
    host.take_latencies(vm)
    host.advance(10.0)
    return np.percentile(host.take_latencies(vm), 99) / profile.qos_p99_us


@pytest.mark.parametrize('seed', (1, 2, 3))
def test_a_larger_flavor_starts_more_workers(seed):
    # 1.7 times the 8-vCPU flavor's max load: one worker per vCPU serves
    # it within QoS; the eight workers of that flavor cannot.
    per_vcpu = profiles.MEMCACHED
    eight = profiles.with_options(per_vcpu, [('memcached.threads', 8)])
    assert _p99_share_of_16_vcpu_memcached(per_vcpu, seed) < 0.9
    assert _p99_share_of_16_vcpu_memcached(eight, seed) > 2


def test_busy_sibling_slows_work():
    def chunks(cpus):
        host = SimHost(HostSpec(cores=2, smt=2, smt_slowdown=1.5))
        vm = host.add_vm('a', 2, profiles.BE(threads=2))
        host.pin_vcpus(vm, cpus)
        host.advance(20.0)
        return host.counters(vm).requests_done

    apart, together = chunks([0, 2]), chunks([0, 1])
    assert together / apart == pytest.approx(1 / 1.5, rel=0.15)


@pytest.mark.parametrize('seed', range(6))
def test_random_operations_keep_the_model_consistent(seed):
    rnd = random.Random(seed)
    host = SimHost(HostSpec(cores=4), seed=seed)
    vms = [host.add_vm('a', 8, profiles.MEMCACHED, rps=2000),
           host.add_vm('b', 4, profiles.MYSQL, rps=300),
           host.add_vm('c', 4, profiles.BE(threads=6))]
    for _ in range(60):
        vm, op = rnd.choice(vms), rnd.random()
        if op < 0.3:
            host.pin_vcpus(vm, rnd.sample(range(8), rnd.randint(1, 8)))
        elif op < 0.5:
            host.pin_emulator(vm, rnd.sample(range(8), rnd.randint(1, 8)))
        elif op < 0.7:
            host.set_online(vm, rnd.randint(1, 8))
        elif op < 0.8:
            host.set_rps(vm, rnd.uniform(0, 6000))
        host.advance(rnd.choice([0.0, 0.001, 0.01, 0.05, 0.2]))
        host.check()
    elapsed = round(host.now * 1e9)
    for t in host.cpu_time():
        assert sum(t.values()) == elapsed
