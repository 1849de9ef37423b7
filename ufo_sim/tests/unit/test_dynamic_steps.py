"""ufo-sim dynamic: the per-step figures the controller issue judges."""

from ufo_sim.experiments import dynamic
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import ufo


def test_steps_span_from_each_rise_to_the_next_change():
    assert dynamic.step_spans(dynamic.nginx_load, 1.0, 270) == [
        (30, 60), (60, 90), (90, 120), (120, 150)]
    # The paper's one-second MySQL bursts; the last goes past the run.
    assert dynamic.step_spans(dynamic.mysql_load, 1.0, 270) == [
        (45, 46), (100, 101), (160, 161)]
    assert dynamic.step_spans(dynamic.memcached_load, 1.0, 140) == [
        (130, 135)]


def test_reaction_counts_only_a_grow_inside_the_step():
    ok = [True] * 20
    cpus = [2] * 20
    cpus[15:] = [4] * 5             # after the step: not its reaction
    step = dynamic.step_record(5, 10, ok, cpus)
    assert step['grew_after_s'] is None
    cpus[7:] = [4] * 13
    step = dynamic.step_record(5, 10, ok, cpus)
    assert step['grew_after_s'] == 2
    assert step['cores_moved']


def test_violation_is_counted_per_step():
    ok = [True] * 20
    ok[6] = ok[7] = ok[12] = False  # 12 is after the step
    step = dynamic.step_record(5, 10, ok, [2] * 20)
    assert step['violation_s'] == 2
    # It missed QoS before any manager could move: it needed cores.
    assert step['short']
    ok[6] = True
    assert not dynamic.step_record(5, 10, ok, [2] * 20)['short']


def test_a_burst_moves_cores_if_they_change_before_the_settle_ends():
    ok = [True] * 20
    cpus = [2] * 20
    cpus[5 + 1 + dynamic.SETTLE_SECONDS + 1:] = [4] * 5     # later
    assert not dynamic.step_record(5, 6, ok, cpus)['cores_moved']
    cpus[8] = 4
    assert dynamic.step_record(5, 6, ok, cpus)['cores_moved']


def test_summary_splits_bursts_from_steps():
    steps = [
        {'at': 1, 'seconds': 1, 'violation_s': 1, 'grew_after_s': None,
         'cores_moved': True, 'short': True},
        {'at': 10, 'seconds': 30, 'violation_s': 4, 'grew_after_s': 3,
         'cores_moved': True, 'short': True},
        {'at': 40, 'seconds': 30, 'violation_s': 30, 'grew_after_s': None,
         'cores_moved': False, 'short': True},
        # Met QoS at its start: a later grow is not its reaction.
        {'at': 70, 'seconds': 30, 'violation_s': 2, 'grew_after_s': 12,
         'cores_moved': True, 'short': False},
    ]
    s = dynamic.step_summary(steps)
    assert s == {'step_violation_s_max': 30, 'step_reaction_s_mean': 3.0,
                 'steps_short': 2, 'steps_grown': 1, 'bursts': 1,
                 'bursts_moved_cores': 1}
    # Default's cores are UFO's replayed: its moves are not its own.
    s = dynamic.step_summary(steps, own_moves=False)
    assert s['step_reaction_s_mean'] is None
    assert s['steps_grown'] is None and s['bursts_moved_cores'] is None
    assert s['step_violation_s_max'] == 30


def _first_plan(settings):
    scene = dynamic._scene(settings, 0, 1.0)
    agent = ufo.UfoAgent(scene, ufo.config_of(settings))
    scene.host.advance(settings.tick)
    agent.tick([scene.host.take_latencies(vm) for vm in scene.vms])
    plan = agent.agent.last_plan
    return [set(plan.vms[vm].cpus) for vm in scene.vms], plan.emulator_cpus


def test_on_the_paper_host_every_vm_starts_at_its_flavor():
    # Fig. 14 (§6.2): "Initially, each VM is given 8 pCPUs", with the
    # emulator pool apart and "large enough" (§5.2's 8 CPUs).
    settings = dynamic.paper_host(cell_mod.Settings())
    vm_cpus, pool = _first_plan(settings)
    assert [len(cpus) for cpus in vm_cpus] == [8, 8, 8]
    assert pool and not set(pool) & set.union(*vm_cpus)
    # The pool may grow to the 8 CPUs left beside the three flavors.
    assert settings.budget - 3 * 8 == dynamic.PAPER_EMULATOR_CPUS
    # The grids' 16 CPUs cannot hold the three flavors and a pool.
    vm_cpus, _ = _first_plan(cell_mod.Settings())
    assert sum(len(cpus) for cpus in vm_cpus) < 3 * 8
