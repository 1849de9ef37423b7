"""SCHED_IDLE vCPU threads (cgroup v2 ``cpu.idle``), as BE soak uses."""

import numpy as np

from ufo_sim.engine import HostSpec
from ufo_sim.engine import SimHost
from ufo_sim import profiles

MC = profiles.MEMCACHED


def _cpu(host, vm):
    return host.counters(vm).vcpu_cpu_ns


def test_idle_class_gets_nothing_beside_a_runnable_normal_thread():
    host = SimHost(HostSpec(cores=2, smt=1), seed=1)
    normal = host.add_vm('normal', 1, profiles.BE(1))
    idle = host.add_vm('idle', 1, profiles.BE(1))
    for vm in (normal, idle):
        host.pin_vcpus(vm, [0])
        host.pin_emulator(vm, [1])
    host.set_vcpus_idle(idle, True)
    host.advance(1.0)
    a, b = _cpu(host, normal), _cpu(host, idle)
    host.advance(5.0)
    got_normal, got_idle = _cpu(host, normal) - a, _cpu(host, idle) - b
    host.check()
    # The normal one sleeps only for its rare short I/O.
    assert got_normal > 0.97 * 5e9
    assert got_idle < 0.01 * got_normal
    # Back in the normal class, it gets its share again.
    host.set_vcpus_idle(idle, False)
    a, b = _cpu(host, normal), _cpu(host, idle)
    host.advance(5.0)
    assert _cpu(host, idle) - b > 0.7 * (_cpu(host, normal) - a)


def _lc_p99(be_class, load=0.4, seconds=6.0):
    """p99 (us) of a 4-vCPU memcached on CPUs 0-3, and BE chunks done."""
    host = SimHost(HostSpec(cores=7, smt=1), seed=2)
    lc = host.add_vm('lc', 4, MC, rps=MC.max_rps * load)
    host.pin_vcpus(lc, range(4))
    host.pin_emulator(lc, [4, 5])
    be = None
    if be_class is not None:
        be = host.add_vm('be', 4, profiles.BE(8))
        host.pin_vcpus(be, range(4))
        host.pin_emulator(be, [6])
        host.set_vcpus_idle(be, be_class == 'idle')
    host.advance(1.0)
    host.take_latencies(lc)
    done = host.counters(be).requests_done if be else 0
    host.advance(seconds)
    host.check()
    p99 = float(np.percentile(host.take_latencies(lc), 99))
    return p99, (host.counters(be).requests_done - done if be else 0)


def test_lc_beside_idle_class_be_keeps_its_tail():
    alone, _ = _lc_p99(None)
    soaked, be_done = _lc_p99('idle')
    shared, _ = _lc_p99('normal')
    assert soaked < 1.3 * alone
    assert shared > 10 * soaked
    # The BE VM still soaks up the CPUs the LC VM leaves idle.
    assert be_done > 0


def _be_throughput(idle, seconds=4.0):
    host = SimHost(HostSpec(cores=5, smt=1), seed=3)
    be = host.add_vm('be', 4, profiles.BE(4))
    host.pin_vcpus(be, range(4))
    host.pin_emulator(be, [4])
    host.set_vcpus_idle(be, idle)
    host.advance(1.0)
    before = host.counters(be).requests_done
    host.advance(seconds)
    return host.counters(be).requests_done - before


def test_idle_class_be_runs_at_full_speed_on_idle_cpus():
    soaking = _be_throughput(True)
    assert soaking > 0
    assert soaking > 0.95 * _be_throughput(False)


def test_wakeup_prefers_a_cpu_running_only_idle_class_work():
    # CPU 0 runs a normal busy thread, CPU 1 an idle-class one; the LC
    # vCPU last ran on CPU 0, then may use both.
    host = SimHost(HostSpec(cores=3, smt=1), seed=4)
    busy = host.add_vm('busy', 1, profiles.BE(1))
    soak = host.add_vm('soak', 1, profiles.BE(1))
    lc = host.add_vm('lc', 1, MC, rps=MC.max_rps * 0.05)
    host.pin_vcpus(busy, [0])
    host.pin_vcpus(soak, [1])
    host.pin_vcpus(lc, [0])
    for vm in (busy, soak, lc):
        host.pin_emulator(vm, [2])
    host.set_vcpus_idle(soak, True)
    host.advance(0.5)
    host.pin_vcpus(lc, [0, 1])
    host.advance(0.5)
    before = {vm: _cpu(host, vm) for vm in (busy, soak, lc)}
    seconds = 5.0
    host.advance(seconds)
    host.check()
    got = {vm: _cpu(host, vm) - before[vm] for vm in before}
    assert got[lc] > 0.05 * seconds * 1e9
    # The LC vCPU took its time from the idle-class thread only.
    assert got[busy] > 0.97 * seconds * 1e9
    assert got[soak] < seconds * 1e9 - 0.8 * got[lc]
