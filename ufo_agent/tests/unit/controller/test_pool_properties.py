"""Property-based tests: the pool invariants hold whatever happens.

Random hosts, random VM arrivals and departures, random (even absurd)
samples and emulator loads; after every tick the plan must satisfy
:mod:`ufo_agent.controller.invariants`, and the same inputs must give the
same plans.
"""

import random

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ufo_agent.controller import Controller
from ufo_agent.controller import ControllerConfig
from ufo_agent.controller import HostTopology
from ufo_agent.controller import invariants
from ufo_agent.controller import VmSample
from ufo_agent.controller import VmSpec

hosts = st.tuples(st.integers(2, 24), st.sampled_from([1, 2]),
                  st.integers(1, 2))
classes = st.sampled_from(['lc', 'be', 'auto'])
samples = st.tuples(st.floats(0, 1e4, allow_nan=False),
                    st.floats(0, 1e7, allow_nan=False))
events = st.lists(
    st.one_of(
        st.tuples(st.just('add'), st.integers(1, 16), classes),
        st.tuples(st.just('remove'), st.integers(0, 30)),
        st.tuples(st.just('tick'), st.lists(samples, min_size=1, max_size=12),
                  st.floats(0, 5000, allow_nan=False), st.integers(1, 4)),
    ),
    min_size=5, max_size=80)
configs = st.builds(
    ControllerConfig, settle_time=st.sampled_from([0.0, 1.0, 3.0]),
    idle_after=st.sampled_from([0.0, 2.0, 10.0]),
    emulator_min_cores=st.integers(0, 2),
    idle_pool_min_cores=st.integers(0, 1),
    detect_flat_sf=st.booleans(),
    be_policy=st.sampled_from(['idle-pool', 'soak']))


def _replay(host, config, script):
    cores, smt, numa = host
    topology = HostTopology.uniform(max(cores, config.emulator_min_cores + 1),
                                    smt, numa)
    controller = Controller(topology, config)
    specs, plans, now, serial = {}, [], 0.0, 0
    for event in script:
        if event[0] == 'add':
            uuid = 'vm-%03d' % serial
            serial += 1
            specs[uuid] = VmSpec(uuid, event[1], event[2])
            controller.add_vm(specs[uuid])
        elif event[0] == 'remove' and specs:
            uuid = sorted(specs)[event[1] % len(specs)]
            controller.remove_vm(uuid)
            del specs[uuid]
        elif event[0] == 'tick':
            now += event[3]
            values = event[1]
            tick_samples = {}
            for i, uuid in enumerate(sorted(specs)):
                if values and i < len(values):
                    util, sf = values[i]
                    tick_samples[uuid] = VmSample(util, sf)
            plan = controller.tick(now, tick_samples, event[2])
            invariants.check_plan(plan, topology, specs, config)
            plans.append(plan)
    return plans


@settings(max_examples=150, deadline=None)
@given(hosts, configs, events)
def test_pool_invariants_hold(host, config, script):
    _replay(host, config, script)


@settings(max_examples=30, deadline=None)
@given(hosts, configs, events)
def test_controller_is_deterministic(host, config, script):
    first = _replay(host, config, script)
    second = _replay(host, config, script)
    assert first == second


@settings(max_examples=40, deadline=None)
@given(hosts, configs, st.integers(1, 10), st.integers(0, 2 ** 32))
def test_pool_invariants_hold_over_long_runs(host, config, n_vms, seed):
    """Hundreds of ticks of plausible load on several VMs at once."""
    rnd = random.Random(seed)
    cores, smt, numa = host
    topology = HostTopology.uniform(max(cores, config.emulator_min_cores + 1),
                                    smt, numa)
    controller = Controller(topology, config)
    specs = {}
    for i in range(n_vms):
        spec = VmSpec('vm-%02d' % i, rnd.choice([1, 2, 4, 8, 16]),
                      rnd.choice(['lc', 'lc', 'auto', 'be']))
        specs[spec.uuid] = spec
        controller.add_vm(spec)
    load = {uuid: rnd.random() for uuid in specs}
    plan = None
    for t in range(300):
        tick_samples = {}
        for uuid, spec in specs.items():
            if rnd.random() < 0.05:
                load[uuid] = rnd.choice([0.0, rnd.random()])
            pcpus = len(plan.vms[uuid].cpus) if plan else spec.vcpus
            util = min(load[uuid] * 100 * spec.vcpus, 92.0 * pcpus)
            util *= 1 + rnd.uniform(-0.05, 0.05)
            sf = 20000 * load[uuid] * (1 - min(1, util / (100 * pcpus)) ** 2)
            tick_samples[uuid] = VmSample(util, sf)
        plan = controller.tick(float(t), tick_samples,
                               rnd.uniform(0, 60 * n_vms))
        invariants.check_plan(plan, topology, specs, config)


def test_invariant_checker_catches_broken_plans():
    import dataclasses
    import pytest
    topology = HostTopology.uniform(4, 2)
    config = ControllerConfig()
    controller = Controller(topology, config)
    specs = {'a': VmSpec('a', 4), 'b': VmSpec('b', 2)}
    for spec in specs.values():
        controller.add_vm(spec)
    plan = controller.tick(0.0, {}, 10.0)
    invariants.check_plan(plan, topology, specs, config)
    a, b = plan.vms['a'], plan.vms['b']
    overlap = dict(plan.vms, b=dataclasses.replace(b, cores=b.cores | a.cores))
    with pytest.raises(invariants.InvariantError, match='invariant 1'):
        invariants.check_plan(dataclasses.replace(plan, vms=overlap),
                              topology, specs, config)
    lost = dataclasses.replace(plan, idle_cores=frozenset())
    if plan.idle_cores:
        with pytest.raises(invariants.InvariantError, match='invariant 1'):
            invariants.check_plan(lost, topology, specs, config)
    online = dict(plan.vms, a=dataclasses.replace(a, online_vcpus=5))
    with pytest.raises(invariants.InvariantError, match='invariant 6'):
        invariants.check_plan(dataclasses.replace(plan, vms=online),
                              topology, specs, config)
    flag = dataclasses.replace(plan, overloaded=True, shortfall_cores=0)
    with pytest.raises(invariants.InvariantError, match='invariant 7'):
        invariants.check_plan(flag, topology, specs, config)


def test_invariant_checker_catches_idle_priority_out_of_place():
    import dataclasses
    import pytest
    topology = HostTopology.uniform(4, 2)
    specs = {'lc': VmSpec('lc', 2, 'lc'), 'be': VmSpec('be', 2, 'be')}
    for policy in ('idle-pool', 'soak'):
        config = ControllerConfig(be_policy=policy)
        controller = Controller(topology, config)
        for spec in specs.values():
            controller.add_vm(spec)
        plan = controller.tick(0.0, {}, 10.0)
        invariants.check_plan(plan, topology, specs, config)
        lc, be = plan.vms['lc'], plan.vms['be']
        assert be.sched_idle == (policy == 'soak') and not lc.sched_idle
        wrong = dict(plan.vms, lc=dataclasses.replace(lc, sched_idle=True))
        with pytest.raises(invariants.InvariantError, match='invariant 8'):
            invariants.check_plan(dataclasses.replace(plan, vms=wrong),
                                  topology, specs, config)
        flipped = dict(plan.vms, be=dataclasses.replace(
            be, sched_idle=not be.sched_idle))
        with pytest.raises(invariants.InvariantError, match='invariant 8'):
            invariants.check_plan(dataclasses.replace(plan, vms=flipped),
                                  topology, specs, config)
    narrow = dict(plan.vms, be=dataclasses.replace(
        be, cpus=topology.cpus_of(plan.idle_cores)))
    with pytest.raises(invariants.InvariantError, match='invariant 8'):
        invariants.check_plan(dataclasses.replace(plan, vms=narrow),
                              topology, specs, config)
