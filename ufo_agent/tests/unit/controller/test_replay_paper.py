"""Replays of the worked examples of the UFO paper, decision by decision.

Each test drives the real controller tick by tick against synthetic VMs
(see synthetic.py) and asserts the exact decisions the paper describes.
Core counts are physical cores on an SMT-2 host: the paper's 2/4/6/8 pCPUs
are 1/2/3/4 cores here.
"""

from ufo_agent.controller import Controller
from ufo_agent.controller import ControllerConfig
from ufo_agent.controller import HostTopology
from ufo_agent.controller import plan as plan_mod
from ufo_agent.controller import predictor
from ufo_agent.controller import VmSample
from ufo_agent.controller import VmSpec
from ufo_agent.tests.unit.controller import synthetic as syn

DIURNAL = [(0, 0.2), (30, 0.4), (60, 0.6), (90, 0.8), (120, 1.0),
           (150, 0.8), (180, 0.6), (210, 0.4), (240, 0.2)]


# The paper's controller acts on every sample; ours waits for a second
# one by default (confirm_samples, tested in test_confirmation.py), and
# its emulator pool's band is 60-80 %, not the paper's 50-70 %. The
# replays use the paper's settings so that every decision and its time
# stay the paper's.
PAPER = ControllerConfig(confirm_samples=1, **syn.PAPER_EMULATOR_BAND)


def _host(cores=16, config=None):
    return Controller(HostTopology.uniform(cores, threads_per_core=2),
                      config or PAPER)


def _run(vm, end, vm_class='lc', controller=None, emulator_busy=30.0):
    controller = controller or _host()
    controller.add_vm(VmSpec(vm.uuid, vm.vcpus, vm_class))
    driver = syn.Driver(controller, [vm],
                        emulator_busy=lambda t: emulator_busy)
    driver.run(0, end)
    return controller, driver


def _moves(decisions):
    return [(d.time, d.action, d.old, d.new) for d in decisions]


def _sf_step(reason):
    """(low, high, SF(low)/SF(high)) of the SF rule in ``reason``."""
    found = [r for r in reason.parts() if r.rule in (
        predictor.SF_DROP, predictor.SF_FLAT, predictor.SF_DROP_BELOW)]
    assert found, reason
    values = found[0].values
    return values['low'], values['high'], values['ratio']


def test_fig9a_cold_start_shrinks_until_sf_falls_30_percent():
    # Low load, SF drops sharply below 2 cores (knee 2): the controller
    # starts at the flavor size (8 pCPUs), probes one core down every
    # settle time, and steps back where SF falls by more than 30%.
    vm = syn.SyntheticVm('vm', vcpus=8, phases=[(0, 0.5)], base_demand=0.0,
                         demand_per_load=260.0, max_rate=50000.0, knee=2.0)
    controller, driver = _run(vm, 60)
    assert _moves(driver.decisions) == [
        (0.0, 'start', 0, 4),
        (3.0, 'probe', 4, 3),
        (6.0, 'probe', 3, 2),
        (9.0, 'probe', 2, 1),
        (12.0, 'revert', 1, 2),
    ]
    revert = driver.decisions[-1]
    low, high, ratio = _sf_step(revert.reason)
    assert ratio <= 0.7
    # The probe to 1 core was allowed by PCU (65% <= 80%): SF stopped it.
    assert (low, high) == (1, 2)
    final = driver.plans[-1].vms['vm']
    assert len(final.cores) == 2 and final.online_vcpus == 4
    assert not final.probing


def test_nginx_diurnal_section_6_2_1():
    vm = syn.nginx(phases=DIURNAL)
    controller, driver = _run(vm, 270)
    # Cold start at 20% load settles on 2 pCPUs (1 core).
    assert driver.cores_at('nginx', 29.0) == 1
    # At 30 s util is 184% on 2 pCPUs (PCU 92%): grow to 4 pCPUs.
    grow = driver.decisions_for('nginx', since=30, until=33)
    assert _moves(grow) == [(31.0, 'grow', 1, 2)]
    high = grow[0].reason.find(predictor.PCU_HIGH)
    assert (round(high.values['pcu']), high.values['cores']) == (92, 1)
    # After the settle time: 55% * 4/6 = 37% < 40%, so it stops at 4.
    at_34 = driver.plans[34].vms['nginx']
    assert len(at_34.cores) == 2
    low = at_34.note.find(predictor.PCU_LOW)
    assert (round(low.values['pcu']), low.values['cores']) == (37, 3)
    assert driver.decisions_for('nginx', since=32, until=60) == []
    # At 60 s: try 6 pCPUs, SF rises by less than 30%, back to 4.
    trial = driver.decisions_for('nginx', since=60, until=89)
    assert _moves(trial) == [(61.0, 'probe', 2, 3), (64.0, 'revert', 3, 2)]
    _, _, ratio = _sf_step(trial[1].reason)
    assert 0.7 <= ratio < 1.0
    rise = 1.0 / ratio - 1.0
    assert 0.15 < rise < 0.30      # the paper saw +21%
    # Models are fitted for the counts it has lived on...
    fitted = controller.vms['nginx'].model.fitted()
    assert {2, 3} <= set(fitted)
    # ...so when load falls it goes straight to the right count: no trial.
    falling = driver.decisions_for('nginx', since=150)
    assert [d.action for d in falling] == ['shrink', 'shrink']
    assert _moves(falling) == [(181.0, 'shrink', 3, 2),
                               (241.0, 'shrink', 2, 1)]
    assert driver.cores_at('nginx', 200.0) == 2
    assert driver.cores_at('nginx', 270.0) == 1


def test_nginx_large_drop_jumps_several_cores_at_once():
    phases = DIURNAL[:5] + [(150, 0.2)]
    controller, driver = _run(syn.nginx(phases=phases), 200)
    falling = driver.decisions_for('nginx', since=150)
    assert _moves(falling) == [(151.0, 'shrink', 3, 1)]


def test_nginx_noisy_load_uses_the_pred_table():
    # With per-second load noise the model sees many utilizations, fits
    # curves at 1, 2 and 3 cores, and the Pred table answers directly.
    vm = syn.nginx(phases=DIURNAL, noise=0.04, seed=1)
    controller, driver = _run(vm, 270)
    falling = driver.decisions_for('nginx', since=150)
    assert 'probe' not in [d.action for d in falling]
    assert predictor.PRED in [d.reason.rule for d in falling]
    assert driver.cores_at('nginx', 270.0) == 1
    model = controller.vms['nginx'].model
    assert model.pred_of(1) is not None


def test_memcached_burst_section_6_2_3():
    phases = [(0, 0.1), (130, 0.8), (135, 0.1), (187, 0.8), (202, 0.1)]
    controller, driver = _run(syn.memcached(phases=phases), 230)
    assert driver.cores_at('memcached', 129.0) == 1
    burst = driver.decisions_for('memcached', since=130, until=135)
    # Cold (no samples at high load): 2 -> 4 -> 6 pCPUs in two steps.
    assert _moves(burst) == [(131.0, 'grow', 1, 2), (134.0, 'grow', 2, 3)]
    assert burst[-1].time - 130 <= 4
    # The 15 s burst also gets its 6 pCPUs within 4 s.
    second = driver.decisions_for('memcached', since=187, until=191)
    assert [d.new for d in second][-1] == 3
    assert second[-1].time - 187 <= 4
    assert driver.cores_at('memcached', 230.0) == 1


def test_emulator_pool_grows_above_70_and_shrinks_below_50():
    controller = _host(cores=8)
    vm = syn.nginx(phases=[(0, 0.2)])
    controller.add_vm(VmSpec(vm.uuid, vm.vcpus, 'lc'))
    busy = {0: 100.0, 1: 160.0, 2: 160.0, 3: 100.0, 4: 40.0}
    driver = syn.Driver(controller, [vm],
                        emulator_busy=lambda t: busy.get(int(t), 40.0))
    sizes = []
    for t in range(6):
        plan = driver.tick(float(t))
        sizes.append(len(plan.emulator_cores))
    # 1 core = 2 pCPUs. 100% busy = 50%: keep. 160% = 80% > 70%: grow
    # until under 50% (2 cores, 40%). 100% on 2 cores = 25% < 50%: shrink
    # while under 70% (1 core: 50%). 40%: stay at the 1-core minimum.
    assert sizes == [1, 2, 2, 1, 1, 1]
    actions = [(d.time, d.action, d.old, d.new) for d in driver.decisions
               if d.vm == 'emulator']
    assert actions == [(1.0, 'emulator-grow', 1, 2),
                       (3.0, 'emulator-shrink', 2, 1)]


def test_the_default_emulator_band_lets_the_pool_run_busier():
    # A change on purpose (controller.rst, "One tick"): 160 % busy on one
    # core (80 %) is not above the default high mark; 170 % (85 %) grows
    # to 2 cores (42.5 % < 60 %), and 100 % there (25 %) gives the core
    # back (50 % on one core < 80 %).
    controller = _host(cores=8, config=ControllerConfig(confirm_samples=1))
    vm = syn.nginx(phases=[(0, 0.2)])
    controller.add_vm(VmSpec(vm.uuid, vm.vcpus, 'lc'))
    busy = {0: 100.0, 1: 160.0, 2: 170.0, 3: 170.0, 4: 100.0}
    driver = syn.Driver(controller, [vm],
                        emulator_busy=lambda t: busy.get(int(t), 40.0))
    sizes = [len(driver.tick(float(t)).emulator_cores) for t in range(6)]
    assert sizes == [1, 1, 2, 2, 1, 1]


def test_emulator_grow_ends_the_ticks_work():
    controller = _host(cores=8)
    vm = syn.nginx(phases=[(0, 0.2)])
    controller.add_vm(VmSpec(vm.uuid, vm.vcpus, 'lc'))
    # The VM would probe 4 -> 3 cores at t=3; the emulator grows then.
    driver = syn.Driver(controller, [vm],
                        emulator_busy=lambda t: 190.0 if t == 3 else 20.0)
    driver.run(0, 4)
    assert _moves(driver.decisions_for('nginx')) == [
        (0.0, 'start', 0, 4), (4.0, 'probe', 4, 3)]


def test_idle_vm_is_parked_and_comes_back():
    config = ControllerConfig(idle_after=5.0, confirm_samples=1)
    controller = _host(cores=8, config=config)
    controller.add_vm(VmSpec('sleepy', 4, 'lc'))
    controller.add_vm(VmSpec('busy', 4, 'lc'))

    def samples(t):
        util = 0.3 if 10 <= t < 30 else 120.0
        return {'sleepy': VmSample(util, 800.0 if util > 1 else 2.0),
                'busy': VmSample(120.0, 20000.0)}

    plans = {}
    for t in range(40):
        plans[t] = controller.tick(float(t), samples(t), 20.0)
    parked = [d for p in plans.values() for d in p.decisions
              if d.vm == 'sleepy' and d.action in ('park', 'wake')]
    assert [(d.time, d.action) for d in parked] == [(15.0, 'park'),
                                                    (30.0, 'wake')]
    idle = plans[20].vms['sleepy']
    assert idle.mode == plan_mod.VmMode.IDLE
    assert idle.cores == frozenset()
    assert idle.cpus == plans[20].idle_cpus and idle.online_vcpus == 1
    before = len(plans[14].vms['sleepy'].cores)
    back = plans[30].vms['sleepy']
    assert back.mode == plan_mod.VmMode.ACTIVE and len(back.cores) == before


def test_overload_raises_flag_with_the_shortfall():
    # 4 cores without SMT: 1 emulator core, 3 for two VMs that each need
    # 3 cores (saturated at 92% per pCPU until they have them).
    controller = Controller(HostTopology.uniform(4, threads_per_core=1))
    controller.add_vm(VmSpec('a', 4, 'lc'))
    controller.add_vm(VmSpec('b', 4, 'lc'))
    demand = 270.0

    plan = None
    for t in range(12):
        samples = {}
        for uuid in ('a', 'b'):
            cores = len(plan.vms[uuid].cores) if plan else 1
            util = min(demand, 92.0 * cores)
            samples[uuid] = VmSample(util, 1000.0)
        plan = controller.tick(float(t), samples, 10.0)
    assert plan.overloaded
    # Max-min fair: one core each, the third to the VM with the larger
    # unmet demand. a (2 cores at 92%) needs 3; b (1 core at 92%) needs 2.
    given = {u: len(v.cores) for u, v in plan.vms.items()}
    wanted = {u: v.wanted_cores for u, v in plan.vms.items()}
    assert given == {'a': 2, 'b': 1}
    assert wanted == {'a': 3, 'b': 2}
    assert plan.shortfall_cores == 2
    assert not (plan.vms['a'].cores & plan.vms['b'].cores)
    # A third VM still gets a core of its own: every active VM gets one
    # before anyone gets a second, so a is squeezed.
    controller.add_vm(VmSpec('c', 2, 'lc'))
    samples = {u: VmSample(90.0, 1000.0) for u in ('a', 'b', 'c')}
    plan = controller.tick(12.0, samples, 10.0)
    assert {u: len(v.cores) for u, v in plan.vms.items()} == {
        'a': 1, 'b': 1, 'c': 1}
    assert [(d.vm, d.action, d.old, d.new) for d in plan.decisions] == [
        ('a', 'squeeze', 2, 1), ('c', 'start', 0, 1)]
    # a (90% on 2 cores) still wants 2, b (90% on 1 core) wants 2; c is
    # new and only its first core is committed.
    assert plan.overloaded and plan.shortfall_cores == 1 + 1
    # A fourth finds none: VMs that cannot have a core share one idle-pool
    # core (VMs holding cores keep them first, then by uuid).
    controller.add_vm(VmSpec('d', 2, 'lc'))
    samples['d'] = VmSample(50.0, 1000.0)
    plan = controller.tick(13.0, samples, 10.0)
    assert {u: len(v.cores) for u, v in plan.vms.items()} == {
        'a': 1, 'b': 1, 'c': 0, 'd': 0}
    assert len(plan.idle_cores) == 1
    for uuid in ('c', 'd'):
        assert plan.vms[uuid].cpus == plan.idle_cpus
    assert plan.shortfall_cores == 1 + 1 + 1 + 1
