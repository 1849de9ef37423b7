"""Hybrid hosts: little cores run slower, and the agent puts its
emulator pool there and the guests' vCPU pools on the big cores."""

import pytest

from ufo_sim import engine
from ufo_sim.engine import HostSpec
from ufo_sim.engine import SimHost
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import scenario
from ufo_sim.managers import ufo
from ufo_sim import profiles


def _batch_done(spec, cpus):
    host = SimHost(spec, seed=3)
    vm = host.add_vm('be', 2, profiles.BE(threads=2))
    host.pin_vcpus(vm, cpus)
    host.pin_emulator(vm, cpus)
    host.advance(2.0)
    return host.counters(vm).requests_done


def test_a_little_core_does_less_work_in_the_same_time():
    spec = HostSpec(cores=4, smt=1, little_cores=2, little_speed=0.5)
    assert spec.little_cpus() == {2, 3}
    big = _batch_done(spec, [0, 1])
    little = _batch_done(spec, [2, 3])
    # Half the pace for the CPU part of each chunk; its I/O waits are
    # not slower.
    assert 0.5 * big <= little <= 0.85 * big
    # With no little core the host runs as it always did.
    plain = _batch_done(HostSpec(cores=4, smt=1), [2, 3])
    assert plain == pytest.approx(big, rel=0.02)


@pytest.mark.parametrize('options', [{'little_cores': 8},
                                     {'little_cores': -1},
                                     {'little_speed': 0.0},
                                     {'little_speed': 1.5}])
def test_bad_core_classes_are_refused(options):
    with pytest.raises(ValueError, match='little'):
        HostSpec(cores=8, **options)


def test_the_agent_puts_its_emulator_pool_on_the_little_cores():
    cell = cell_mod.Cell((cell_mod.VmLoad('memcached', 0.2),
                          cell_mod.VmLoad('nginx', 0.2)))
    settings = cell_mod.Settings(host_options=(('little_cores', 2),))
    scene = scenario.build(cell, settings, seed=5)
    agent = ufo.UfoAgent(scene)
    little = scene.host.little
    assert agent.agent.topology.cpus_of(
        agent.agent.topology.little_core_ids) == little
    topo = agent.agent.topology
    held = {vm: frozenset() for vm in scene.vms}
    for _ in range(25):
        scene.host.advance(engine.TIME_SCALE)
        plan = agent.tick()
        # Little cores go to the emulator pool before big ones, and to a
        # guest only when no big core is left for it. A guest keeps the
        # cores it holds, so a big core the emulator pool gives back can
        # sit idle beside a guest's little one until that guest resizes.
        emulator_little = plan.emulator_cores & topo.little_core_ids
        assert emulator_little or not plan.emulator_cores & (
            topo.core_ids - topo.little_core_ids) or \
            topo.little_core_ids <= set().union(
                *(p.cores for p in plan.vms.values()))
        for vm in scene.vms:
            given = plan.vms[vm].cores - held[vm]
            if given & topo.little_core_ids:
                assert not plan.idle_cores - topo.little_core_ids
            held[vm] = plan.vms[vm].cores
    # Once the light guests have shrunk, they are all on big cores.
    assert all(not plan.vms[vm].cpus & little for vm in scene.vms)
    assert plan.emulator_cores & topo.little_core_ids
