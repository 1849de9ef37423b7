"""Small hosts: no emulator or idle core of their own (two-core hosts).

With ``emulator_min_cores = 0`` and ``idle_pool_min_cores = 0`` a busy VM
may hold every managed core, while parked VMs and emulator threads share
every managed CPU; with cores free they move to the idle pool.
"""

from ufo_agent.controller import Controller
from ufo_agent.controller import ControllerConfig
from ufo_agent.controller import invariants
from ufo_agent.controller.plan import VmSample
from ufo_agent.controller.plan import VmSpec
from ufo_agent.controller.topology import HostTopology

SMALL = ControllerConfig(emulator_min_cores=0, idle_pool_min_cores=0,
                         idle_after=2.0, settle_time=0.0)
BUSY = VmSample(util=195.0, sf=9000.0)
QUIET = VmSample(util=0.2, sf=3.0)


def _controller(config=SMALL, cores=2):
    ctl = Controller(HostTopology.uniform(cores, 1, 1), config)
    specs = {}
    for uuid in ('a', 'b', 'c'):
        specs[uuid] = VmSpec(uuid, 2)
        ctl.add_vm(specs[uuid])
    return ctl, specs


def _run(ctl, specs, samples_of, ticks, start, emulator_busy=5.0):
    plan = None
    for t in range(start, start + ticks):
        plan = ctl.tick(float(t), samples_of(t), emulator_busy)
        invariants.check_plan(plan, ctl.topology, specs, ctl.config)
    return plan


def test_one_busy_vm_takes_every_core_and_the_rest_share():
    ctl, specs = _controller()
    plan = _run(ctl, specs, lambda t: {'a': BUSY, 'b': QUIET, 'c': QUIET},
                ticks=12, start=0)
    all_cpus = frozenset({0, 1})
    assert len(plan.vms['a'].cores) == 2
    assert plan.vms['a'].online_vcpus == 2
    for uuid in ('b', 'c'):
        assert plan.vms[uuid].mode.value == 'idle'
        assert plan.vms[uuid].cpus == all_cpus
        assert plan.vms[uuid].online_vcpus == 1
    assert not plan.idle_cores and not plan.emulator_cores
    assert plan.emulator_cpus == all_cpus == plan.shared_cpus
    assert not plan.overloaded


def test_cores_follow_the_load_from_one_vm_to_the_other():
    ctl, specs = _controller()
    _run(ctl, specs, lambda t: {'a': BUSY, 'b': QUIET, 'c': QUIET},
         ticks=12, start=0)
    plan = _run(ctl, specs, lambda t: {'a': BUSY, 'b': BUSY, 'c': QUIET},
                ticks=6, start=12)
    assert [len(plan.vms[u].cores) for u in 'ab'] == [1, 1]
    assert plan.overloaded       # each wants two
    plan = _run(ctl, specs, lambda t: {'a': QUIET, 'b': BUSY, 'c': QUIET},
                ticks=12, start=18)
    assert plan.vms['a'].mode.value == 'idle'
    assert len(plan.vms['b'].cores) == 2
    assert plan.vms['b'].online_vcpus == 2


def test_busy_emulator_threads_get_a_core_and_give_it_back():
    ctl, specs = _controller(cores=4)
    plan = _run(ctl, specs, lambda t: {'a': QUIET, 'b': QUIET, 'c': QUIET},
                ticks=6, start=0)
    assert not plan.emulator_cores
    assert plan.emulator_cpus == plan.idle_cpus == plan.shared_cpus
    plan = _run(ctl, specs, lambda t: {'a': QUIET, 'b': QUIET, 'c': QUIET},
                ticks=2, start=6, emulator_busy=90.0)
    assert len(plan.emulator_cores) == 2
    assert plan.emulator_cpus == ctl.topology.cpus_of(plan.emulator_cores)
    plan = _run(ctl, specs, lambda t: {'a': QUIET, 'b': QUIET, 'c': QUIET},
                ticks=2, start=8, emulator_busy=10.0)
    assert not plan.emulator_cores


def test_default_config_keeps_an_emulator_and_an_idle_core():
    ctl, specs = _controller(ControllerConfig(idle_after=2.0,
                                              settle_time=0.0), cores=3)
    plan = _run(ctl, specs, lambda t: {'a': BUSY, 'b': QUIET, 'c': QUIET},
                ticks=12, start=0)
    assert len(plan.emulator_cores) == 1 and len(plan.idle_cores) == 1
    assert len(plan.vms['a'].cores) == 1
    assert plan.vms['b'].cpus == plan.idle_cpus == plan.shared_cpus


def test_a_quiet_vm_left_without_a_core_keeps_one_vcpu_online():
    # Both busy on a core each, then one goes quiet: the busy one takes
    # its core at once, and the quiet one shares the CPUs until parked.
    # It runs as a parked VM does, on one vCPU: all of them online would
    # put vCPUs on the busy VM's cores now and take them off again when
    # idle_after parks it, two hotplugs of a guest that is doing nothing.
    config = ControllerConfig(emulator_min_cores=0, idle_pool_min_cores=0,
                              idle_after=8.0, settle_time=0.0)
    ctl, specs = _controller(config)
    plan = _run(ctl, specs, lambda t: {'a': BUSY, 'b': BUSY, 'c': QUIET},
                ticks=20, start=0)
    assert [len(plan.vms[u].cores) for u in 'ab'] == [1, 1]
    assert [plan.vms[u].online_vcpus for u in 'ab'] == [1, 1]
    seen = []
    for t in range(20, 32):
        plan = _run(ctl, specs,
                    lambda t: {'a': QUIET, 'b': BUSY, 'c': QUIET},
                    ticks=1, start=t)
        a = plan.vms['a']
        seen.append((a.mode.value, len(a.cores), a.online_vcpus))
    assert len(plan.vms['b'].cores) == 2
    assert ('active', 0, 1) in seen            # quiet, its core given up
    assert seen[-1] == ('idle', 0, 1)          # then parked
    assert all(online == 1 for _, _, online in seen), seen
