"""The real ufo-agent loop and controller, unmodified, on a SimHost."""

from ufo_agent.controller import invariants
from ufo_agent.controller import plan as plan_mod
from ufo_sim import engine
from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import scenario
from ufo_sim.managers import ufo


def _scene(loads, cores=8):
    cell = cell_mod.Cell(tuple(cell_mod.VmLoad('memcached', x)
                               for x in loads))
    return scenario.build(cell, cell_mod.Settings(cores=cores), seed=7)


def _to_second(scene, second):
    """Run the host to the end of real second ``second``."""
    scene.host.advance_to(second * engine.TIME_SCALE)


def test_agent_plans_keep_the_invariants_and_reach_the_host():
    scene = _scene((0.2, 0.2))
    u = ufo.UfoAgent(scene)
    agent = u.agent
    specs = {vm: plan_mod.VmSpec(vm, 8, 'lc') for vm in scene.vms}
    held = []
    plan = None
    for second in range(1, 16):
        _to_second(scene, second)
        # The clock is the host's in real seconds.
        assert agent.clock() == second
        if plan is not None:
            # The guest took the last targets' vCPUs on- or offline
            # within the second, each in its hotplug time.
            for vm in scene.vms:
                assert scene.host.online(vm) == plan.vms[vm].online_vcpus
        plan = u.tick()
        invariants.check_plan(plan, agent.topology, specs,
                              agent.controller.config)
        for vm in scene.vms:
            vcpus, emulator = u.driver.read_pins(vm)
            assert vcpus == {plan.vms[vm].cpus}
            assert emulator == plan.emulator_cpus
        held.append(u.held_cpus())
    assert agent.ticks == 15
    # Both guests report through the channel, and at 20 % load UFO hands
    # back cores it started with.
    assert all(agent.status[vm].signal == 'guest' for vm in scene.vms)
    assert held[-1] < held[0]
    assert held[-1] < 16


def test_stop_gives_every_guest_back():
    scene = _scene((0.3, 0.1), cores=4)
    u = ufo.UfoAgent(scene)
    for _ in range(4):
        scene.host.advance(engine.TIME_SCALE)
        u.tick()
    assert u.agent.stop() == []
    scene.host.advance(engine.TIME_SCALE)
    for vm in scene.vms:
        assert scene.host.online(vm) == 8
        assert u.driver.read_pins(vm) == ({frozenset(range(8))},
                                          frozenset(range(8)))


def test_a_removed_guest_is_dropped_and_its_pool_freed():
    scene = _scene((0.5, 0.5), cores=4)
    u = ufo.UfoAgent(scene)
    for _ in range(6):
        scene.host.advance(engine.TIME_SCALE)
        plan = u.tick()
    gone, kept = scene.vms
    assert plan.vms[gone].cores
    u.driver.remove(gone)
    assert [g.uuid for g in u.driver.guests()] == [kept]
    scene.host.advance(engine.TIME_SCALE)
    plan = u.tick()
    # The agent saw it stop: no longer managed, no pool, no CPU in any.
    assert gone not in u.agent.guests and gone not in plan.vms
    assert u.held_cpus() == len(plan.vms[kept].cpus |
                                plan.emulator_cpus)
    # The engine stopped it: it drains, then runs nothing.
    scene.host.advance(engine.TIME_SCALE)
    before = scene.host.counters(gone)
    scene.host.advance(engine.TIME_SCALE)
    assert scene.host.counters(gone).vcpu_cpu_ns == before.vcpu_cpu_ns


def test_qos_target_mode_runs_the_agents_own_latency_path():
    scene = _scene((0.2, 0.2))
    u = ufo.UfoAgent(scene, qos_target=True)
    controller = u.agent.controller
    for vm in scene.vms:
        # The profile's QoS target in the flavor, in the agent's real
        # microseconds.
        assert u.driver._get(vm).guest.latency_target_us == 500
        assert controller.vms[vm].spec.latency_target_us == 500
        assert controller.vms[vm].spec.latency_percentile == 99.0
    seen = []
    for second in range(12):
        _to_second(scene, second + 1)
        lat = [scene.host.take_latencies(vm) for vm in scene.vms]
        plan = u.tick(lat)
        for i, vm in enumerate(scene.vms):
            status = u.agent.status[vm]
            # The guest's first value only starts the watch's count.
            assert status.latency_fresh == (second > 0)
            if second:
                assert status.latency_us == round(
                    scenario.p99(lat[i]) / engine.TIME_SCALE)
            seen += plan.vms[vm].note.rules()
    # At 20 % load the guests' p99s leave slack: they are tried smaller.
    assert 'latency-slack-trial' in seen
    # Seconds without latencies publish none: the last p99 stands for
    # three seconds, then the black-box rules.
    for second in range(4):
        _to_second(scene, second + 13)
        plan = u.tick([[] for _ in scene.vms])
        for vm in scene.vms:
            assert u.agent.status[vm].latency_fresh == (second < 3)
    assert all(plan.vms[vm].note.rules()[0] == 'latency-stale'
               for vm in scene.vms)


def test_without_qos_target_no_guest_has_a_target():
    scene = _scene((0.2, 0.2))
    u = ufo.UfoAgent(scene)
    rules = []
    for second in range(1, 9):
        _to_second(scene, second)
        lat = [scene.host.take_latencies(vm) for vm in scene.vms]
        plan = u.tick(lat)
        rules += [r for vm in scene.vms for r in plan.vms[vm].note.rules()]
    assert not any(g.latency_target_us for g in u.driver.guests())
    assert all(s.spec.latency_target_us is None
               for s in u.agent.controller.vms.values())
    assert not [r for r in rules if r.startswith('latency-')]


def test_a_shrinking_guest_is_offline_before_its_pins_narrow():
    # The real agent's order (paper section 4.6): a guest that loses
    # vCPUs is told first, and its pins narrow once it has answered. The
    # simulated guest answers once its vCPUs are offline, each after its
    # hotplug time, and the agent's wait runs the host on meanwhile.
    scene = _scene((0.2, 0.2))
    u = ufo.UfoAgent(scene)
    host, pin = scene.host, u.driver.pin_vcpus
    pins = {vm: len(host.cpus) for vm in scene.vms}
    narrows = []

    def pin_vcpus(uuid, cpus):
        if len(cpus) < pins[uuid]:
            # The engine counts a vCPU online until its teardown is done.
            narrows.append((len(cpus), host.online(uuid)))
        pins[uuid] = len(cpus)
        return pin(uuid, cpus)

    u.driver.pin_vcpus = pin_vcpus
    clocks, waited = [], []

    def control(interval, _lat):
        clocks.append(u.agent.clock())
        plan = u.tick()
        waited.append(u.agent.clock() - clocks[-1])
        return plan

    settings = cell_mod.Settings(cores=8, converge=12, judge=3)
    scenario.run_feedback(scene, settings, u.held_cpus, control)
    assert len(narrows) >= 2
    assert all(online <= cpus for cpus, online in narrows), narrows
    # The waits took part of some seconds (each shrink's vCPUs their
    # hotplug time): the agent still ticked at the start of each.
    assert 0 < max(waited) < 1
    assert clocks == [float(s) for s in range(1, 16)]


def test_a_light_guests_shrinks_cost_it_no_second_over_its_target():
    # Its vCPUs go offline on the CPUs they ran on, then the pins narrow:
    # no request waits behind a vCPU's hotplug work on a CPU it shares.
    for qos_target in (False, True):
        scene = _scene((0.2, 0.2))
        u = ufo.UfoAgent(scene, qos_target=qos_target)
        target = scene.profiles[0].qos_p99_us
        worst, shrinks = 0.0, 0
        for second in range(1, 21):
            _to_second(scene, second)
            lat = [scene.host.take_latencies(vm) for vm in scene.vms]
            worst = max([worst] + [scenario.p99(x) / target for x in lat])
            plan = u.tick(lat)
            shrinks += sum(1 for d in plan.decisions if d.new < d.old)
        assert shrinks >= 2
        assert worst < 1.0, (qos_target, worst)
