"""vCPU hotplug costs the guest time, one vCPU at a time."""

import pytest

from ufo_sim.engine import HostSpec
from ufo_sim.engine import SimHost
from ufo_sim import profiles

MC = profiles.MEMCACHED
COST = HostSpec().hotplug_cost


def _host(load=0.3, cpus=8, **spec):
    host = SimHost(HostSpec(cores=8, smt=2, **spec), seed=4)
    vm = host.add_vm('vm', 8, MC, rps=MC.max_rps * load)
    host.pin_vcpus(vm, range(cpus))
    host.pin_emulator(vm, range(8, 16))
    host.advance(1.0)
    return host, vm


def _online_at(host, vm, times):
    out = []
    for t in times:
        host.advance(t - host.now)
        host.check()
        out.append(host.online(vm))
    return out


def test_offlining_takes_its_cost_per_vcpu():
    host, vm = _host()
    t0 = host.now
    # One vCPU after the other; each counts online until its teardown
    # is done (it takes no guest thread meanwhile).
    assert host.set_online(vm, 6, hotplug=True) == 8
    assert _online_at(host, vm, [t0 + 0.9 * COST, t0 + 1.1 * COST,
                                 t0 + 2.1 * COST]) == [8, 7, 6]


def test_onlining_takes_its_cost_per_vcpu():
    host, vm = _host()
    host.set_online(vm, 6)
    t0 = host.now
    assert host.set_online(vm, 8, hotplug=True) == 6
    assert _online_at(host, vm, [t0 + 0.9 * COST, t0 + 1.1 * COST,
                                 t0 + 2.1 * COST]) == [6, 7, 8]


def test_hotplug_work_is_guest_time_on_the_vcpu_in_transit():
    def busy(hotplug):
        host, vm = _host(load=0.05)
        before = host.counters(vm).guest_busy_ns
        host.set_online(vm, 6, hotplug=hotplug)
        host.advance(3 * COST)
        return host.counters(vm).guest_busy_ns - before

    extra = busy(True) - busy(False)
    assert extra == pytest.approx(2 * COST * 1e9, rel=0.1)


def test_a_vcpu_waiting_for_its_cpu_takes_longer():
    # Eight vCPUs of a busy guest on two CPUs: the vCPU in transit waits
    # its turn on the host, as the paper's busier guests took longer.
    host, vm = _host(load=0.9, cpus=2)
    t0 = host.now
    host.set_online(vm, 7, hotplug=True)
    while host.online(vm) > 7 and host.now < t0 + 20 * COST:
        host.advance(COST / 20)
    assert host.online(vm) == 7
    assert host.now - t0 > 1.5 * COST


def test_setting_online_at_once_ends_a_hotplug():
    host, vm = _host()
    host.set_online(vm, 4, hotplug=True)
    host.advance(1.5 * COST)
    assert host.set_online(vm, 5) == 5
    host.check()
    host.advance(3 * COST)
    assert host.online(vm) == 5
    host.check()


def test_no_cost_is_at_once():
    host, vm = _host(hotplug_cost=0.0)
    assert host.set_online(vm, 6, hotplug=True) == 6
    host.check()
