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


def test_the_flavor_reference_holds_each_vm_on_its_own_cores():
    # What Nginx misses on its whole flavor is what no controller could
    # spare it (the Fig. 14 calibration row's reference).
    settings = dynamic.paper_host(cell_mod.Settings())
    scene = dynamic._scene(settings, 0, 1.0)
    host, pins = scene.host, {}
    pin_vcpus, pin_emulator = host.pin_vcpus, host.pin_emulator

    def record(kind, pin):
        def spy(vm, cpus):
            pins[vm, kind] = frozenset(cpus)
            pin(vm, cpus)
        return spy
    host.pin_vcpus = record('vcpus', pin_vcpus)
    host.pin_emulator = record('emulator', pin_emulator)
    cpus = dynamic._flavor_layout(scene, settings,
                                  scene.cores[:settings.cores], 1.0)
    assert cpus == [8, 8, 8]
    own = [pins[vm, 'vcpus'] for vm in scene.vms]
    assert [len(c) for c in own] == [8, 8, 8]
    assert len(frozenset().union(*own)) == 24
    pools = {pins[vm, 'emulator'] for vm in scene.vms}
    assert len(pools) == 1
    (pool,) = pools
    assert len(pool) == dynamic.PAPER_EMULATOR_CPUS
    assert not pool & frozenset().union(*own)


def test_a_flavor_run_reports_no_moves_of_its_own():
    settings = dynamic.paper_host(cell_mod.Settings())
    result = dynamic._simulate(dynamic.FLAVOR, settings, 0.05)
    for vm in result['vms'].values():
        assert vm['reaction_s_mean'] is None
        assert vm['steps_grown'] is None
    assert result['mean_held_cpus'] == settings.budget


def test_a_step_recovers_at_its_first_second_under_qos():
    ok = [True] * 5 + [False, False, True, False, True] + [True] * 5
    assert dynamic.step_record(5, 10, ok, [2] * 15)[
        'recovered_after_s'] == 2
    assert dynamic.step_record(0, 5, ok, [2] * 15)[
        'recovered_after_s'] == 0
    never = [True] * 5 + [False] * 10
    assert dynamic.step_record(5, 10, never, [2] * 15)[
        'recovered_after_s'] == 5
