"""The surrogate's features over an index equal the sums over every VM."""

import math
import random

import pytest

from ufo_sim.cluster import host_features

SIBLINGS = tuple((2 * core, 2 * core + 1) for core in range(32))
EVERY = frozenset(range(64))


def _capacity_core_by_core(cpus, siblings, smt_slowdown):
    total = 0.0
    for group in siblings:
        inside = sum(1 for c in group if c in cpus)
        if inside == 1:
            total += 1.0
        elif inside > 1:
            total += inside / smt_slowdown
    return total


def _host(seed):
    """VMs on dedicated cores, small shared sets and the whole host."""
    rng = random.Random(seed)
    emulator = frozenset(rng.sample(sorted(EVERY), rng.randint(1, 6)))
    vms = []
    for i in range(rng.randint(1, 120)):
        kind = rng.random()
        if kind < 0.3:
            vcpus = EVERY
        elif kind < 0.5:
            vcpus = frozenset(rng.sample(sorted(EVERY), rng.randint(1, 4)))
        else:
            core = rng.randrange(31)
            vcpus = frozenset(range(2 * core,
                                    2 * core + 2 * rng.randint(1, 2)))
        emu = emulator if rng.random() < 0.7 else vcpus
        vms.append(host_features.VmState(
            'vm%d' % i, rng.random() < 0.7, rng.randint(1, 16), vcpus, emu,
            rng.choice([0.0, 4 * rng.random()]),
            rng.choice([0.0, rng.random()])))
    return vms


def _all_of_them(vms):
    served = host_features.served(vms, SIBLINGS, 1.5)
    return (host_features.features(vms, SIBLINGS, 1.5), served,
            host_features.emulator_pool_load(vms, served, SIBLINGS, 1.5),
            host_features.crowding(vms, SIBLINGS))


@pytest.mark.parametrize('seed', range(40))
def test_pools_looked_up_by_cpu_give_the_sums_over_every_vm(seed,
                                                            monkeypatch):
    # Equal to the last bit: the surrogate's verdicts must not move.
    vms = _host(seed)
    indexed = _all_of_them(vms)
    monkeypatch.setattr(host_features._ByCpu, 'on',
                        lambda self, cpus: list(self.items))
    assert indexed == _all_of_them(vms)
    for vm in vms:
        assert host_features.capacity(vm.vcpu_cpus, SIBLINGS, 1.5) == \
            _capacity_core_by_core(vm.vcpu_cpus, SIBLINGS, 1.5)


def test_a_pool_counts_a_lone_cpu_of_a_core_whole():
    assert host_features.capacity({0, 2, 3}, SIBLINGS, 1.5) == \
        1.0 + 2 / 1.5
    assert host_features.capacity([3, 2, 0], list(SIBLINGS), 1.5) == \
        1.0 + 2 / 1.5
    assert math.isclose(host_features.capacity(EVERY, SIBLINGS, 2.0), 32.0)
