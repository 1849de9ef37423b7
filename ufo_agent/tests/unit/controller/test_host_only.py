"""Guests managed host-only: judged by the steal of their vCPU threads."""

from ufo_agent.controller import Controller
from ufo_agent.controller import ControllerConfig
from ufo_agent.controller import hostonly
from ufo_agent.controller import HostTopology
from ufo_agent.controller import plan as plan_mod
from ufo_agent.controller import predictor
from ufo_agent.controller import VmSample
from ufo_agent.controller import VmSpec

Action = plan_mod.Action
CONFIG = ControllerConfig(settle_time=0.0, confirm_samples=1)


def rule(max_cores=4, config=CONFIG):
    return hostonly.HostOnlyPredictor(config, max_cores, 2)


def test_steal_above_the_limit_grows_to_the_runnable_demand():
    # 300 % ran and as much again waited: 6 CPUs of demand, 3 cores.
    pred, _ = rule().predict(1, 300.0, 0.5, 10.0)
    assert (pred.action, pred.cores, pred.committed) == (Action.GROW, 3, 3)


def test_a_small_steal_above_the_limit_grows_by_one():
    pred, _ = rule().predict(2, 150.0, 0.06, 10.0)
    assert (pred.action, pred.cores) == (Action.GROW, 3)


def test_no_growth_past_the_flavor():
    pred, _ = rule(max_cores=2).predict(2, 400.0, 0.4, 10.0)
    assert (pred.action, pred.cores) == (Action.STAY, 2)


def test_a_busy_guest_that_does_not_steal_is_not_grown():
    # Utilization on the host includes halt polling: no demand by itself.
    pred, _ = rule().predict(2, 390.0, 0.03, 10.0)
    assert (pred.action, pred.cores) == (Action.STAY, 2)


def test_little_steal_probes_one_core_fewer():
    pred, failed = rule().predict(3, 200.0, 0.01, 10.0)
    assert (pred.action, pred.cores) == (Action.PROBE, 2)
    assert pred.trial.origin_cores == 3 and failed is None


def test_a_probe_that_steals_goes_back_and_is_remembered():
    r = rule()
    probe, _ = r.predict(3, 200.0, 0.01, 10.0)
    back, failed = r.predict(2, 230.0, 0.12, 14.0, probe.trial)
    assert (back.action, back.cores) == (Action.REVERT, 3)
    assert back.trial is None
    assert failed == hostonly.FailedShrink(2, 200.0, 14.0)
    # At the same load the same count is not tried again...
    again, _ = r.predict(3, 205.0, 0.01, 30.0, None, failed)
    assert (again.action, again.cores) == (Action.STAY, 3)
    # ... but it is once the load has fallen past the tolerance,
    lighter, _ = r.predict(3, 150.0, 0.01, 30.0, None, failed)
    assert (lighter.action, lighter.cores) == (Action.PROBE, 2)
    # or once the memory is older than sample_max_age.
    later, _ = r.predict(3, 205.0, 0.01, 14.0 + CONFIG.sample_max_age + 1,
                         None, failed)
    assert (later.action, later.cores) == (Action.PROBE, 2)


def test_a_probe_that_holds_is_kept():
    trial = predictor.Trial(3, 200.0, 10.0)
    pred, _ = rule().predict(2, 210.0, 0.03, 14.0, trial)
    assert (pred.action, pred.cores, pred.trial) == (Action.ACCEPT, 2, None)


def test_steal_between_half_the_limit_and_the_limit_stays():
    pred, _ = rule().predict(3, 200.0, 0.04, 10.0)
    assert (pred.action, pred.cores) == (Action.STAY, 3)


def host_only_controller(vcpus=8, config=CONFIG):
    controller = Controller(HostTopology.uniform(8, 2), config)
    controller.add_vm(VmSpec('vm', vcpus, 'lc'))
    return controller


def test_the_controller_judges_host_only_samples_by_steal_not_sf():
    controller = host_only_controller()
    plan = controller.tick(0.0, {'vm': VmSample(150.0, 500.0, steal=0.0)},
                           5.0)
    assert len(plan.vms['vm'].cores) == 4      # flavor-size start
    cores = []
    # An SF that collapses would keep a guest-mode VM where it is; a
    # host-only one that does not steal gives cores back, one at a time.
    for t in range(1, 12):
        sample = VmSample(150.0, 500.0 / t, steal=0.0)
        cores.append(len(controller.tick(float(t), {'vm': sample},
                                         5.0).vms['vm'].cores))
    assert cores[-1] == 1
    assert cores == sorted(cores, reverse=True)
    assert controller.vms['vm'].model.models == {}    # no SF learned


def test_a_host_only_guest_that_steals_gets_its_cores_back():
    controller = host_only_controller()
    controller.tick(0.0, {'vm': VmSample(100.0, 0.0, steal=0.0)}, 5.0)
    t = 1.0
    state = controller.vms['vm']
    while len(state.cores) > 1 or state.trial is not None:
        controller.tick(t, {'vm': VmSample(100.0, 0.0, steal=0.0)}, 5.0)
        t += 1
    # Load arrives: 200 % ran on 2 CPUs and 600 % waited.
    plan = controller.tick(t, {'vm': VmSample(200.0, 0.0, steal=0.75)}, 5.0)
    assert len(plan.vms['vm'].cores) == 4
    grow = [d for d in plan.decisions if d.vm == 'vm']
    assert grow and grow[0].action == Action.GROW
    assert grow[0].reason.rule == hostonly.STEAL_HIGH
    assert round(grow[0].reason.values['steal']) == 75


def test_a_trial_of_one_rule_is_dropped_when_the_guest_changes_mode():
    controller = host_only_controller()
    controller.tick(0.0, {'vm': VmSample(300.0, 5000.0, steal=0.0)}, 5.0)
    controller.tick(1.0, {'vm': VmSample(300.0, 5000.0, steal=0.0)}, 5.0)
    state = controller.vms['vm']
    assert state.trial is not None             # a host-only probe
    controller.tick(2.0, {'vm': VmSample(300.0, 5000.0)}, 5.0)
    # The guest-mode walk starts from its own origin, not the probe's.
    assert state.trial is None or state.trial.origin_cores == 3


def test_steal_is_judged_above_what_the_guest_steals_isolated():
    # The host's other threads cost it 30 % with a CPU per vCPU: more
    # cores cannot cure that part.
    pred, _ = rule().predict(4, 200.0, 0.31, 10.0, isolated=0.30)
    assert (pred.action, pred.cores) == (Action.PROBE, 3)
    assert pred.reason.rule == hostonly.STEAL_LOW
    assert round(pred.reason.values['isolated']) == 30
    pred, _ = rule().predict(1, 200.0, 0.40, 10.0, isolated=0.30)
    assert (pred.action, pred.cores) == (Action.GROW, 2)
    assert pred.reason.rule == hostonly.STEAL_HIGH
    assert [round(pred.reason.values[k]) for k in (
        'steal', 'limit', 'isolated')] == [40, 5, 30]
    pred, _ = rule().predict(2, 200.0, 0.33, 10.0, predictor.Trial(
        3, 200.0, 5.0), isolated=0.30)
    assert pred.action == Action.ACCEPT


def test_the_controller_learns_the_isolated_steal_at_flavor_size():
    controller = host_only_controller()
    # A noisy host: 30 % steal even with a CPU per vCPU (4 cores).
    controller.tick(0.0, {'vm': VmSample(300.0, 0.0, steal=0.30)}, 5.0)
    plan = controller.tick(1.0, {'vm': VmSample(300.0, 0.0, steal=0.30)},
                           5.0)
    assert controller.vms['vm'].isolated_steal == 0.30
    assert len(plan.vms['vm'].cores) == 3       # probed down all the same


def test_a_probe_whose_vcpus_wait_for_each_other_goes_back():
    # A small host: 40 % steal even with a CPU per vCPU. On one core its
    # two busy vCPUs share one CPU: the steal barely rises, the runnable
    # demand (95 % ran, 45 % of the runnable time waited) is 173 % of a
    # CPU on one CPU.
    r = hostonly.HostOnlyPredictor(CONFIG, 2, 1, vcpus=2)
    trial = predictor.Trial(2, 120.0, 10.0)
    pred, failed = r.predict(1, 95.0, 0.45, 14.0, trial, isolated=0.40)
    assert (pred.action, pred.cores) == (Action.REVERT, 2)
    assert pred.reason.rule == hostonly.RUNNABLE_HIGH
    assert round(pred.reason.values['runnable']) == 173
    assert pred.reason.values['cpus'] == pred.reason.values['cores'] == 1
    assert failed.cores == 1
    # Light load on one core: the same steal, no shortage: kept.
    pred, _ = r.predict(1, 5.0, 0.45, 14.0, trial, isolated=0.40)
    assert pred.action == Action.ACCEPT


def test_a_guest_with_a_cpu_per_vcpu_is_never_short_by_demand():
    r = hostonly.HostOnlyPredictor(CONFIG, 2, 1, vcpus=2)
    assert r.short(2, 200.0, 0.40, isolated=0.40) is None
    assert r.short(1, 200.0, 0.40,
                   isolated=0.40).rule == hostonly.RUNNABLE_HIGH


def test_a_count_it_had_to_grow_from_is_not_probed_again_at_that_load():
    # A probe held at first, then the guest was short there: it grows,
    # and one core is not tried again while the load stays.
    r = rule(max_cores=2)
    grow, failed = r.predict(1, 100.0, 0.45, 20.0)
    assert (grow.action, grow.cores) == (Action.GROW, 2)
    assert failed == hostonly.FailedShrink(1, 100.0, 20.0)
    stay, _ = r.predict(2, 180.0, 0.0, 24.0, None, failed)
    assert (stay.action, stay.cores) == (Action.STAY, 2)
    # Idle later: tried again.
    probe, _ = r.predict(2, 20.0, 0.0, 60.0, None, failed)
    assert (probe.action, probe.cores) == (Action.PROBE, 1)
