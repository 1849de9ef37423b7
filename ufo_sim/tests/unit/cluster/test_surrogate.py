"""The surrogate host: features, counters, the agent over it, the fit."""

import json
import math

import pytest

from ufo_agent.controller import config as controller_config
from ufo_agent.service import loop
from ufo_agent.service import settings as settings_mod
from ufo_sim.cluster import host as host_mod
from ufo_sim.cluster import host_features
from ufo_sim.cluster import surrogate
from ufo_sim.cluster import surrogate_fit
from ufo_sim import driver as sim_driver
from ufo_sim import engine
from ufo_sim import profiles
from ufo_sim.tests.unit.cluster import requests

SIBLINGS = ((0, 1), (2, 3), (4, 5), (6, 7))


def _state(name, vcpus, emu, demand=1.0, lc=True, online=4):
    return host_features.VmState(name, lc, online, frozenset(vcpus),
                                 frozenset(emu), demand, 0.1)


def test_a_widely_pinned_neighbour_counts_for_its_share():
    # a has core 0 (CPUs 0-1) to itself but for f, which floats over all
    # 8 CPUs: a meets a quarter of f's demand. vCPU work counts against
    # the core's capacity, emulator CPU (0.1 each) against its 2 CPUs.
    a = _state('a', {0, 1}, {0, 1}, demand=1.0)
    f = _state('f', set(range(8)), set(range(8)), demand=2.0)
    alone = host_features.features([a], SIBLINGS, 1.5)['a']
    both = host_features.features([a, f], SIBLINGS, 1.5)['a']
    cap = 2 / 1.5
    assert alone['rho_v'] == pytest.approx(1.0 / cap + 0.1 / 2)
    assert both['rho_v'] == pytest.approx((1.0 + 2.0 / 4) / cap +
                                          (0.1 + 0.1 / 4) / 2)
    assert host_features.capacity({0, 1, 2}, SIBLINGS, 1.5) == \
        pytest.approx(2 / 1.5 + 1)


def test_features_see_neighbours_and_batch_work():
    lc = _state('lc', {0, 1, 2, 3}, {0, 1, 2, 3}, 1.0)
    be = _state('be', {0, 1, 2, 3}, {0, 1, 2, 3}, 2.0, lc=False)
    alone = host_features.features([lc], SIBLINGS, 1.5)['lc']
    shared = host_features.features([lc, be], SIBLINGS, 1.5)
    assert alone['be'] == 0 and alone['emu_home'] == 1.0
    assert shared['lc']['rho_v'] > alone['rho_v']
    assert shared['lc']['be'] == pytest.approx(2.0 / (4 / 1.5))
    assert shared['be']['be'] == 0.0
    assert alone['u'] == pytest.approx(0.25)


def _host(rps_share, cpus=range(8)):
    host = surrogate.SurrogateHost(engine.HostSpec(cores=4, smt=2), seed=1)
    p = profiles.MEMCACHED
    host.add_vm('a', 4, p, rps=rps_share * p.max_rps / 2)
    host.pin_vcpus('a', list(cpus))
    return host


def test_counters_grow_with_load_and_an_overload_is_a_violation():
    light, heavy = _host(0.2), _host(1.0, cpus=[0])
    for h in (light, heavy):
        h.advance(50.0)
    a, b = light.counters('a'), heavy.counters('a')
    assert a.requests_done == a.requests_arrived > 0
    assert 0 < a.guest_busy_ns <= a.vcpu_cpu_ns
    assert a.guest_sched_in > 0 and a.vcpu_slices > 0
    assert not light.take_p99('a')[1]
    assert b.requests_done < b.requests_arrived
    assert heavy.take_p99('a')[1]
    light.advance(50.0)
    assert light.counters('a').requests_done > a.requests_done
    assert light.now == 100.0
    # To a time, as the engine's host: not past it, never back.
    light.advance_to(150.0)
    assert light.now == 150.0
    light.advance_to(120.0)
    assert light.now == 150.0


def test_a_stopped_vm_uses_nothing():
    h = _host(0.5)
    h.advance(50.0)
    h.stop_vm('a')
    before = h.counters('a')
    h.advance(50.0)
    assert h.counters('a') == before
    with pytest.raises(ValueError):
        h.set_rps('a', 1.0)


def test_the_real_agent_runs_over_it_on_guest_samples():
    h = _host(0.2)
    d = sim_driver.SimDriver(h)
    d.add('a', 4)
    agent = loop.Agent(d, d.all_cpus, controller_config.ControllerConfig(),
                       settings_mod.AgentSettings(), clock=d.now)
    agent.start()
    held = []
    for _ in range(12):
        h.advance(engine.TIME_SCALE)
        plan = agent.tick()
        held.append(len(plan.vms['a'].cpus) + len(plan.emulator_cpus))
    # The guest's samples pass the cross-check against the host's
    # counters, and at 20 % load the agent gives cores back.
    assert agent.status['a'].signal == 'guest'
    assert agent.tick_errors == 0
    assert held[-1] < 8


@pytest.mark.parametrize('policy', host_mod.POLICIES)
def test_cluster_host_on_the_surrogate(policy):
    h = host_mod.ClusterHost('h0', 4, 2, policy, seed=1,
                             fidelity='surrogate')
    for i in range(3):
        h.boot(requests.steady('v%d' % i, seed=i))
    step = h.step(300, {'v0': 0.3, 'v1': 0.3, 'v2': 0.3})
    assert step.seconds == 300 and len(step.held_cpus) == 300
    assert all(len(v.p99_us) == 300 for v in step.vms.values())
    assert 0 <= step.violation_s <= 900
    if policy == 'ufo':
        # Quasi-static: the agent ticked until the layout held, not 300
        # times.
        assert h.agent.ticks < 60
    h.delete('v0')
    assert set(h.step(10, {}).vms) == {'v1', 'v2'}


def test_every_second_when_not_quasi_static():
    h = host_mod.ClusterHost('h0', 4, 2, 'ufo', seed=1,
                             fidelity='surrogate', quasi_static=False)
    h.boot(requests.steady('v0'))
    h.step(30, {'v0': 0.3})
    assert h.agent.ticks == 30


def test_a_quiet_vm_is_parked_as_when_stepping_every_second():
    # The agent parks a VM quiet for idle_after seconds with nothing
    # else changing: the quasi-static jump must not skip that.
    held = {}
    for quasi in (True, False):
        h = host_mod.ClusterHost('h0', 4, 2, 'ufo', seed=1,
                                 fidelity='surrogate', quasi_static=quasi)
        h.boot(requests.steady('v0', seed=0))
        h.boot(requests.steady('v1', seed=0))
        step = h.step(60, {'v0': 0.3, 'v1': 0.0})
        assert not h.agent.last_plan.vms['v1'].cores
        held[quasi] = step.held_cpus
    assert held[True] == held[False]
    # Once parked, the rest of a step runs at once again.
    ticks = h.agent.ticks
    h.quasi_static = True
    h.step(300, {'v0': 0.3, 'v1': 0.0})
    assert h.agent.ticks - ticks < 20


def test_a_quiet_vms_timer_ends_a_jump_rather_than_every_jump():
    # A VM going quiet parks idle_after seconds later: the jump runs to
    # the second before, and the agent's own tick parks it, where each
    # second of the timer was ticked through before (15 ticks).
    ticks, held = {}, {}
    for quasi in (True, False):
        h = host_mod.ClusterHost('h0', 4, 2, 'ufo', seed=1,
                                 fidelity='surrogate', quasi_static=quasi)
        h.boot(requests.steady('v0', seed=0))
        h.boot(requests.steady('v1', seed=0))
        h.step(60, {'v0': 0.3, 'v1': 0.3})
        before = h.agent.ticks
        held[quasi] = h.step(300, {'v0': 0.3, 'v1': 0.0}).held_cpus
        ticks[quasi] = h.agent.ticks - before
        assert not h.agent.last_plan.vms['v1'].cores
    # Two jumps (to the park, then the rest), each ended by a tick.
    assert ticks[True] <= host_mod.MIN_TICKS + host_mod.STABLE_TICKS + 4
    # The second the layout changes is booked with the jump's held CPUs.
    assert sum(a != b for a, b in zip(held[True], held[False])) <= 1


def test_a_move_awaiting_its_confirming_sample_is_not_jumped_over():
    # A 16-vCPU Memcached VM woken by a burst after a park: stepping
    # every second the agent confirms its grow and it meets QoS again
    # within 20 s. A jump after three ticks of the same layout broke the
    # confirming streak (a sample 1.5 ticks after the last), so the
    # agent asked again each step and the VM stayed at 2 cores, missing
    # every second (issue 64, seed 2, VM g0000088).
    cores, missed = {}, {}
    for quasi in (True, False):
        h = host_mod.ClusterHost('h0', 16, 2, 'ufo', seed=1,
                                 fidelity='surrogate', quasi_static=quasi)
        h.boot(requests.steady('v0', vcpus=16, seed=0, mean=0.636))
        h.step(15, {'v0': 0.636})
        h.step(600, {'v0': 0.0})
        missed[quasi] = sum(h.step(5, {'v0': 0.636}).vms['v0'].violation_s
                            for _ in range(12))
        cores[quasi] = len(h.agent.last_plan.vms['v0'].cores)
    assert cores[True] == cores[False] >= 4
    assert missed[True] <= missed[False] + 2 < 30


@pytest.mark.parametrize('quiet, busy', [(0.0, 0.636), (0.2, 0.8)])
def test_a_load_change_after_a_jump_is_met_as_stepping_every_second(
        quiet, busy):
    # After a jump the agent's next sample spanned the jump as well: a
    # wake or a rise at the next step's start read diluted (a parked
    # MySQL VM at 1,234 requests/s read 1/53 of a vCPU busy) and the
    # agent acted a tick late, one violation second more each time
    # (issue 64, generated seed 3, VM g0000028).
    missed, cores = {}, {}
    for quasi in (True, False):
        h = host_mod.ClusterHost('h0', 16, 2, 'ufo', seed=1,
                                 fidelity='surrogate', quasi_static=quasi)
        h.boot(requests.steady('v0', vcpus=16, seed=0, mean=busy))
        h.step(15, {'v0': busy})
        h.step(600, {'v0': quiet})
        missed[quasi] = h.step(10, {'v0': busy}).vms['v0'].violation_s
        cores[quasi] = len(h.agent.last_plan.vms['v0'].cores)
    assert missed[False] > 0
    assert missed[True] == missed[False]
    assert cores[True] == cores[False]


def test_the_stored_parameters_are_the_fit_of_the_stored_data():
    train, _ = surrogate_fit.load_data()
    fitted = json.loads(json.dumps(surrogate_fit.fit(train)))
    stored = surrogate.load_params()
    assert fitted == stored
    for name in ('memcached', 'nginx', 'mysql'):
        model = stored['knn'][name]
        assert len(model['verdict']['y']) >= 100
        assert all(math.isfinite(y) for y in model['p99']['y'])


def test_held_out_engine_cells_are_met_within_the_stated_error():
    # The error the research records state (2026-12-02 cluster hosts,
    # 2026-12-03 surrogate low load, 2026-12-04 goal violations,
    # 2026-12-06 surrogate SMT pace): verdicts agree on 97.2 % of the
    # held-out LC VMs, the p99 of those the engine found meeting QoS is
    # off by 7.8 % at the median, the busy time of those that served
    # their load by 13.6 %.
    train, held = surrogate_fit.load_data()
    result = surrogate_fit.validate(held, surrogate.load_params())
    assert result['vms'] == 753
    assert result['verdict_agreement'] >= 0.95
    assert result['p99_median_error'] <= 0.15
    assert result['busy_median_error'] <= 0.15


def test_two_engine_measurements_are_compared_as_the_surrogate_is():
    _, held = surrogate_fit.load_data()
    cells = held[:40]
    same = surrogate_fit.engine_agreement(cells, cells)
    assert same['vms'] == sum(1 for c in cells for vm in c['vms']
                              if vm['profile'] != 'be')
    assert (same['verdict_agreement'], same['p99_within_15'],
            same['p99_median_error']) == (1.0, 1.0, 0.0)
    # One met VM's p99 20 % higher: off by more than 15 %, the verdict
    # kept if it stays under its target.
    moved, which = [], None
    for c in cells:
        rows = [dict(r) for r in c['measured']]
        for (vm, row, p, bad), r in zip(surrogate_fit.lc_rows(c), rows):
            if which is None and not bad and row['p99_us'] * 1.2 < \
                    p.qos_p99_us:
                r['p99_us'] = row['p99_us'] * 1.2
                which = vm['name']
        moved.append(dict(c, measured=rows))
    assert which is not None
    result = surrogate_fit.engine_agreement(cells, moved)
    assert result['verdict_agreement'] == 1.0
    assert result['p99_within_15'] == pytest.approx(
        1.0 - 1.0 / same['p99_rows'])


def test_cells_measured_again_run_todays_engine_at_a_moved_seed():
    _, held = surrogate_fit.load_data()
    cells = [c for c in held if not surrogate_fit.is_low(c['seed'])][:2]
    today = surrogate_fit.remeasured(cells, 1)
    assert [c['measured'] for c in today] == [
        surrogate_fit.run_cell({k: v for k, v in c.items()
                                if k != 'measured'})['measured']
        for c in cells]
    other = surrogate_fit.remeasured(cells, 1, 7)
    assert [c['seed'] for c in other] == [c['seed'] for c in cells]
    assert [c['measured'] for c in other] != [c['measured'] for c in today]


def test_held_out_low_load_cells_are_met():
    # LC VMs under 5 % load, alone or among busy BE threads: the
    # surrogate fitted without such cells agreed on 87 % of the
    # held-out verdicts, its p99 off by 50 % at the median; now 98 %
    # and 9 %.
    _, held = surrogate_fit.load_data()
    low = [c for c in held if surrogate_fit.is_low(c['seed'])]
    result = surrogate_fit.validate(low, surrogate.load_params())
    assert result['vms'] == 120
    assert result['verdict_agreement'] >= 0.9
    assert result['p99_median_error'] <= 0.15


def test_a_wake_among_busy_threads_pays_a_refill_a_free_core_none():
    # 4 cores: 2 busy threads elsewhere leave a core no other thread
    # runs on; 4 do not. A wake 1 s after the last finds the caches
    # cold; one 1 ms after finds them barely touched.
    refill = host_features.wake_refill
    assert refill(1.0, 3.0, 3.8, 0.01, 1.0, 2.0, 4) == 0.0
    assert refill(1.0, 3.0, 3.8, 0.01, 1.0, 4.0, 4) == pytest.approx(2.8)
    assert refill(1.0, 2.0, 3.8, 0.01, 1.0, 4.0, 4) == pytest.approx(2.0)
    assert refill(1.0, 3.0, 3.8, 0.01, 1e-3, 4.0, 4) < 0.3


def _parked(host, load):
    """(guest s per request, utilization %) of a parked quiet VM.

    A 2-vCPU Memcached VM, one vCPU online, among busy BE threads on
    cores 0-2, as UFO parks it; every emulator thread on core 3.
    """
    p = profiles.MEMCACHED
    host.add_vm('be', 8, profiles.BE(threads=8))
    host.add_vm('lc', 2, p, rps=load * p.max_rps * 2 / p.vcpus)
    host.set_online('lc', 1)
    for vm in ('be', 'lc'):
        host.pin_vcpus(vm, range(6))
        host.pin_emulator(vm, [6, 7])
    host.advance(engine.TIME_SCALE)
    before = host.counters('lc')
    host.advance(4 * engine.TIME_SCALE)
    after = host.counters('lc')
    busy = (after.guest_busy_ns - before.guest_busy_ns) / 1e9
    done = after.requests_done - before.requests_done
    # Guest time per request, and utilization in % of a CPU as the
    # guest module reports it (per real second).
    return busy / done, busy / (4 * engine.TIME_SCALE) * 100


def test_a_parked_quiet_vm_pays_cache_refills_as_on_the_engine():
    # The engine's requests wake the vCPU on a core the BE threads ran
    # on and pay the refill: about 3 times the fitted guest time, its
    # utilization over the agent's 1 % wake mark. The surrogate gave
    # the fitted cost (0.42 %), so the agent kept the VM parked.
    spec = engine.HostSpec(cores=4, smt=2)
    eng_cost, eng_util = _parked(engine.SimHost(spec, seed=7), 0.003)
    sur_cost, sur_util = _parked(surrogate.SurrogateHost(spec, seed=7),
                                 0.003)
    fitted = surrogate.load_params()['cost']['memcached']['vcpu_s']
    assert eng_cost > 2.5 * fitted
    assert sur_cost == pytest.approx(eng_cost, rel=0.2)
    assert eng_util > 1.0 and sur_util > 1.0


def test_a_held_layout_is_judged_once(monkeypatch):
    # The p99 and verdict are a function of the features: advancing a
    # host whose layout and loads hold asks the model once per VM, and
    # again only after a change.
    calls = []
    predict = surrogate.predict

    def counted(params, profile, feats, per_second):
        calls.append(profile.name)
        return predict(params, profile, feats, per_second)

    monkeypatch.setattr(surrogate, 'predict', counted)
    h = _host(0.5)
    for _ in range(5):
        h.advance(1.0)
    assert len(calls) == 1
    h.set_rps('a', 100.0)
    h.advance(1.0)
    h.advance(1.0)
    assert len(calls) == 2


def _one_pool(host, n, load):
    """Add ``n`` 2-vCPU Memcached VMs at ``load`` to ``host``.

    Their vCPUs on cores 1-3, every emulator thread on core 0 (CPUs
    0-1), as UFO's one emulator pool.
    """
    p = profiles.MEMCACHED
    names = ['m%02d' % i for i in range(n)]
    for name in names:
        host.add_vm(name, 2, p, rps=load * p.max_rps * 2 / p.vcpus)
        host.pin_vcpus(name, range(2, 8))
        host.pin_emulator(name, [0, 1])
    return names


def test_a_pool_of_many_quiet_vms_carries_their_summed_emulator_cpu():
    # Twenty nearly idle VMs share one 2-CPU emulator pool. The engine
    # measures their emulator threads' CPU; the surrogate's rho_e on the
    # same layout is that CPU over the pool's CPUs (it counted the pool
    # at the capacity of vCPU work, 1.33 CPUs, and put it over 1).
    spec = engine.HostSpec(cores=4, smt=2)
    eng = engine.SimHost(spec, seed=3)
    names = _one_pool(eng, 20, 0.05)
    eng.advance(engine.TIME_SCALE)
    before = sum(eng.counters(v).emulator_cpu_ns for v in names)
    eng.advance(2 * engine.TIME_SCALE)
    measured = (sum(eng.counters(v).emulator_cpu_ns for v in names) -
                before) / 1e9 / (2 * engine.TIME_SCALE) / 2
    model = surrogate.SurrogateHost(spec, seed=3)
    _one_pool(model, 20, 0.05)
    model.advance(1.0)
    rho_e = model._features['m00'][1]['rho_e']
    assert 0.3 < measured < 0.95
    assert rho_e == pytest.approx(measured, rel=0.15)


def test_an_overloaded_pool_reports_its_cpus_busy():
    # The agent grows its emulator pool on the threads' CPU time over
    # the pool's CPUs: an overloaded pool must read 100 % busy, as on
    # the engine, not the served work of 1.33 CPUs on 2 (67 %, under
    # the grow mark, so the agent kept the pool overloaded).
    model = surrogate.SurrogateHost(engine.HostSpec(cores=4, smt=2), seed=3)
    names = _one_pool(model, 40, 0.1)
    model.advance(10.0)
    emu = sum(model.counters(v).emulator_cpu_ns for v in names) / 1e9 / 10
    assert model._features['m00'][1]['rho_e'] > 1.2
    assert emu == pytest.approx(2.0, rel=1e-3)


def _crowded(host):
    """A light and a heavy Memcached VM beside 12 busy BE threads."""
    p = profiles.MEMCACHED
    host.add_vm('be', 16, profiles.BE(threads=12))
    host.add_vm('light', 2, p, rps=0.01 * p.max_rps * 2 / p.vcpus)
    host.add_vm('heavy', 8, p, rps=0.9 * p.max_rps)
    for vm in ('be', 'light', 'heavy'):
        host.pin_vcpus(vm, range(8))
        host.pin_emulator(vm, range(8))
    host.advance(engine.TIME_SCALE)
    before = {vm: host.counters(vm) for vm in ('be', 'light', 'heavy')}
    host.advance(4 * engine.TIME_SCALE)
    return {vm: {f: getattr(host.counters(vm), f) - getattr(before[vm], f)
                 for f in ('requests_done', 'requests_arrived',
                           'guest_busy_ns')}
            for vm in ('be', 'light', 'heavy')}


def test_an_overloaded_pool_serves_a_light_vm_in_full():
    # CFS serves a thread that rarely runs all it asks; the heavy
    # groups split the rest, the BE VM's 12 threads more than the
    # heavy VM (the surrogate served every group the same share, 28 %
    # of the light VM's requests).
    spec = engine.HostSpec(cores=4, smt=2)
    eng = _crowded(engine.SimHost(spec, seed=5))
    sur = _crowded(surrogate.SurrogateHost(spec, seed=5))
    for run in (eng, sur):
        light, heavy = run['light'], run['heavy']
        assert light['requests_done'] >= 0.99 * light['requests_arrived']
        assert heavy['requests_done'] < 0.5 * heavy['requests_arrived']
        assert run['be']['guest_busy_ns'] > 1.5 * heavy['guest_busy_ns']


def _among_be(host, profile, load, be_threads, seconds):
    """Share of seconds in violation of a parked 2-vCPU LC VM.

    One vCPU online, floating over cores 0-2 with ``be_threads`` busy
    BE threads; every emulator thread on core 3.
    """
    host.add_vm('be', 8, profiles.BE(threads=be_threads))
    rps = load * profile.max_rps * 2 / profile.vcpus
    host.add_vm('lc', 2, profile, rps=rps)
    host.set_online('lc', 1)
    for vm in ('be', 'lc'):
        host.pin_vcpus(vm, range(6))
        host.pin_emulator(vm, [6, 7])
    host.advance(engine.TIME_SCALE)
    bad = 0.0
    for _ in range(seconds):
        host.advance(engine.TIME_SCALE)
        if isinstance(host, engine.SimHost):
            bad += host_mod.violated(profile, host.take_latencies('lc'),
                                     rps * engine.TIME_SCALE)
        else:
            bad += host.take_p99('lc')[1]
    return bad / seconds


def test_a_parked_vm_waits_only_when_no_cpu_is_free():
    # A quiet Memcached VM (200 requests a second) parked among BE
    # threads: with a CPU of the six free its woken vCPU runs at once,
    # with none it waits for a slice and every second misses. The
    # surrogate without the low-load cells missed both.
    spec = engine.HostSpec(cores=4, smt=2)
    p = profiles.MEMCACHED
    for threads, share in ((5, 0.0), (6, 1.0)):
        eng = _among_be(engine.SimHost(spec, seed=2), p, 0.003, threads, 6)
        sur = _among_be(surrogate.SurrogateHost(spec, seed=2), p, 0.003,
                        threads, 6)
        assert eng == share
        assert sur == share


def test_a_second_of_few_requests_is_judged_by_its_slowest():
    # Nginx at 0.0004 of its max: 11 requests a second, parked with no
    # CPU free. A few per cent of its requests wait for a slice, so
    # about a third of its seconds miss on the engine; the surrogate
    # judged every second by its cells' two-second verdict.
    spec = engine.HostSpec(cores=4, smt=2)
    p = profiles.NGINX
    eng = _among_be(engine.SimHost(spec, seed=2), p, 0.0004, 6, 20)
    sur = _among_be(surrogate.SurrogateHost(spec, seed=2), p, 0.0004, 6,
                    20)
    assert 0.1 < eng < 0.7
    assert sur == pytest.approx(eng, abs=0.2)


def _parked_by_repin(host, be_threads, seconds):
    """Share of seconds in violation of a quiet Nginx VM parked in a pool.

    9 requests a real second. Its 4 vCPUs run on core 3 at first; then,
    as the agent parks it, one stays online and it is pinned to the
    pool of cores 0-1 where BE VMs of 4 keep ``be_threads`` busy;
    emulator threads on core 2.
    """
    pool, emulator = range(4), [4, 5]
    left, i = be_threads, 0
    while left:
        host.add_vm('be%d' % i, 4, profiles.BE(threads=min(4, left)))
        host.pin_vcpus('be%d' % i, pool)
        host.pin_emulator('be%d' % i, emulator)
        left -= min(4, left)
        i += 1
    p = profiles.NGINX
    rps = 9 / engine.TIME_SCALE
    host.add_vm('lc', 4, p, rps=rps)
    host.pin_vcpus('lc', [6, 7])
    host.pin_emulator('lc', emulator)
    host.advance(engine.TIME_SCALE)
    host.set_online('lc', 1)
    host.pin_vcpus('lc', pool)
    host.advance(engine.TIME_SCALE)
    if isinstance(host, engine.SimHost):
        host.take_latencies('lc')
    bad = 0.0
    for _ in range(seconds):
        host.advance(engine.TIME_SCALE)
        if isinstance(host, engine.SimHost):
            bad += host_mod.violated(p, host.take_latencies('lc'), 9)
        else:
            bad += host.take_p99('lc')[1]
    return bad / seconds


def test_a_parked_vm_waits_by_the_busy_threads_on_its_cpu():
    # Parked on 4 CPUs among 5 busy threads, the vCPU is put on a CPU
    # with one of them and stays there; it lags that thread's vruntime
    # and mostly runs at once: a third of the seconds miss. Among 8 it
    # shares a CPU with two and queues behind one: every second misses.
    # The surrogate took both from cells of either placement: 0.71 and
    # 0.99.
    spec = engine.HostSpec(cores=4, smt=2)
    for threads, low, high in ((5, 0.15, 0.5), (8, 0.85, 1.0)):
        eng = _parked_by_repin(engine.SimHost(spec, seed=3), threads, 30)
        sur = _parked_by_repin(surrogate.SurrogateHost(spec, seed=3),
                               threads, 30)
        assert low <= eng <= high
        assert sur == pytest.approx(eng, abs=0.15)


def test_parked_wait_cells_give_the_share_over_target_by_threads():
    # Pooled over the cells of each profile and thread count; the other
    # cells are not parked-wait cells and count for nothing here.
    cells = []
    for seed, over, done in ((surrogate_fit.PARKED_SEED, 3, 100),
                             (surrogate_fit.PARKED_SEED + 3, 40, 90),
                             (surrogate_fit.PARKED_SEED + 6, 5, 100),
                             (surrogate_fit.LOW_FIT_SEED, 50, 50)):
        cell = surrogate_fit.draw_cell(seed)
        cell['measured'] = [dict(p99_us=1.0, requests_done=done,
                                 requests_arrived=done, over_target=over,
                                 seconds=2 * engine.TIME_SCALE)] + \
            [dict(p99_us=None, requests_done=0, over_target=None)] * (
                len(cell['vms']) - 1)
        cells.append(cell)
    parked = surrogate_fit.fit_parked(cells)
    assert parked == {'memcached': {
        '1': 0.04, '2': pytest.approx(0.44444, abs=1e-5)}}
    assert surrogate_fit.draw_cell(surrogate_fit.PARKED_SEED + 3)[
        'threads'] == 2


def test_a_share_of_seconds_in_violation_is_booked_whole(monkeypatch):
    # The surrogate's share of seconds in violation adds up over steps:
    # ten 1-second steps book what one 10-second step does.
    monkeypatch.setattr(surrogate, 'predict',
                        lambda params, profile, feats, per_second: (
                            1.0, 0.3))
    booked = []
    for steps, length in ((10, 1), (1, 10)):
        h = host_mod.ClusterHost('h0', 4, 2, 'default', seed=1,
                                 fidelity='surrogate')
        h.boot(requests.steady('v0'))
        booked.append([h.step(length, {'v0': 0.3}).vms['v0'].violation_s
                       for _ in range(steps)])
    assert booked[0] == [0, 0, 0, 1, 0, 0, 1, 0, 0, 1]
    assert booked[1] == [3]


def _shared_pool(host, heavy_load):
    """Five VMs whose emulator threads share core 0 (CPUs 0-1).

    A heavy 8-vCPU Memcached VM at ``heavy_load`` on cores 1-4, two
    Memcached and two Nginx 2-vCPU VMs at 3 % on core 5.
    """
    m, n = profiles.MEMCACHED, profiles.NGINX
    host.add_vm('heavy', 8, m, rps=heavy_load * m.max_rps)
    host.pin_vcpus('heavy', range(2, 10))
    host.pin_emulator('heavy', [0, 1])
    light = []
    for i, p in enumerate((m, n, m, n)):
        name = 'light%d' % i
        host.add_vm(name, 2, p, rps=0.03 * p.max_rps * 2 / p.vcpus)
        host.pin_vcpus(name, [10, 11])
        host.pin_emulator(name, [0, 1])
        light.append(name)
    return _missed(host, light, 2)


def _missed(host, names, seconds):
    """Share of VMs ``names``' seconds in violation after a warm-up one.

    On the engine a second is judged by its latencies, on the surrogate
    by its share.
    """
    host.advance(engine.TIME_SCALE)
    if isinstance(host, engine.SimHost):
        for name in names:
            host.take_latencies(name)
    missed = 0.0
    for _ in range(seconds):
        host.advance(engine.TIME_SCALE)
        for name in names:
            if isinstance(host, engine.SimHost):
                missed += host_mod.violated(host.profile(name),
                                            host.take_latencies(name), 0)
            else:
                missed += host.take_p99(name)[1]
    return missed / (seconds * len(names))


def _on_both(build, seed, *args):
    """(engine, surrogate) of ``build(host, *args)`` on a 6-core host."""
    spec = engine.HostSpec(cores=6, smt=2)
    return (build(engine.SimHost(spec, seed=seed), *args),
            build(surrogate.SurrogateHost(spec, seed=seed), *args))


def test_a_saturated_emulator_pool_makes_its_light_vms_wait():
    # The emulator work of a heavy VM fills the pool: the light VMs'
    # emulator threads wait for a slice on every request and every
    # second misses on the engine (p99 0.3-0.6 s against targets of
    # 25 and 100 ms). The surrogate judged them by features of cells
    # with fewer VMs and missed none. Just under saturation neither
    # misses.
    for heavy_load, share in ((0.7, 0.0), (0.9, 1.0)):
        assert _on_both(_shared_pool, 4, heavy_load) == (share, share)


def test_a_pool_is_saturated_only_by_the_work_that_reaches_it():
    # a's vCPUs serve a third of its requests, so its emulator threads
    # get a third of its offered emulator work: the pool (CPUs 0-1) is
    # not saturated although the offered work would fill it 1.3 times.
    # b's emulator threads run on its own vCPUs' CPUs: not a pool.
    a = host_features.VmState('a', True, 2, frozenset({2, 3}),
                              frozenset({0, 1}), 6.0, 2.0)
    c = host_features.VmState('c', True, 2, frozenset({4, 5}),
                              frozenset({0, 1}), 0.1, 0.6)
    b = host_features.VmState('b', True, 2, frozenset({6, 7}),
                              frozenset({6, 7}), 0.1, 0.6)
    served = host_features.served([a, b, c], SIBLINGS, 1.5)
    load = host_features.emulator_pool_load([a, b, c], served, SIBLINGS,
                                            1.5)
    assert served['a'] == pytest.approx(2 / 1.5 / 6.0)
    assert load['c'] == pytest.approx((2.0 * served['a'] + 0.6) / 2)
    assert load['c'] < 1.0
    assert load['b'] == 0.0
    full = host_features.emulator_pool_load([a, b, c], {}, SIBLINGS, 1.5)
    assert full['c'] == pytest.approx(1.3)


def test_a_request_in_a_saturated_pool_waits_a_slice():
    # Below saturation the prediction stands; above, the wait is added
    # and judged against the target.
    assert surrogate.queued(9e3, 0.0, 0.99, 150e3, 25e3) == (9e3, 0.0)
    assert surrogate.queued(9e3, 0.0, 1.2, 150e3, 25e3) == (159e3, 1.0)
    assert surrogate.queued(60e3, 0.0, 1.2, 150e3, 750e3) == (210e3, 0.0)


def test_stacked_vcpus_are_a_feature_of_their_own():
    # Eight vCPUs online on two CPUs and two on two have the same usable
    # vCPUs; only ``stack`` tells them apart.
    two = _state('two', {0, 1}, {6, 7}, online=2)
    eight = _state('eight', {2, 3}, {6, 7}, online=8)
    feats = host_features.features([two, eight], SIBLINGS, 1.5)
    assert feats['two']['log_n'] == feats['eight']['log_n']
    assert feats['two']['stack'] == 0.0
    assert feats['eight']['stack'] == pytest.approx(math.log(4))


def _busy_on_a_core(host, other_load):
    """A Memcached VM of 2 vCPUs at 0.931 of its max on core 0.

    Its emulator threads share core 5 (CPUs 10-11) with those of an
    8-vCPU Memcached VM at ``other_load`` on cores 1-4: the layout UFO
    gives a busy small VM (issue 64's pilot, VM g0000086). Returns its
    share of 3 seconds in violation.
    """
    m = profiles.MEMCACHED
    host.add_vm('vm', 2, m, rps=0.931 * m.max_rps * 2 / m.vcpus)
    host.pin_vcpus('vm', [0, 1])
    host.pin_emulator('vm', [10, 11])
    host.add_vm('other', 8, m, rps=other_load * m.max_rps)
    host.pin_vcpus('other', range(2, 10))
    host.pin_emulator('other', [10, 11])
    return _missed(host, ['vm'], 3)


def test_a_busy_vm_on_its_own_core_is_not_judged_by_stacked_cells():
    # At a pool load of 0.72 the engine's VM meets QoS (p99 0.55-0.59 of
    # the target, seeds 1-3); its nearest fitted cells were 8-vCPU VMs
    # stacked on 2 CPUs, which miss, and the surrogate said it missed
    # every second (p99 1.44 of the target). With the pool saturated
    # (1.19) both miss.
    for other_load, share in ((0.2, 0.0), (0.6, 1.0)):
        assert _on_both(_busy_on_a_core, 1, other_load) == (share, share)


def test_an_overloaded_vm_on_its_own_core_reads_its_vcpus_busy():
    # An 8-vCPU Memcached VM woken by a burst at 0.636 of its max on
    # one core (2 vCPUs online): the engine's guest reads 200 % and the
    # agent grows it to 3-4 cores within 10 s. The surrogate counted the
    # work the core serves, 133 %, and the agent held it at one core
    # ("PCU 33% < 40% at 2 cores"), missing every second (issue 64's
    # held-out clouds: 4-vCPU VMs at one core through whole bursts).
    h = host_mod.ClusterHost('h0', 16, 2, 'ufo', seed=1,
                             fidelity='surrogate', quasi_static=False)
    h.boot(requests.steady('v0', vcpus=8, seed=0, mean=0.636))
    # Light before its park, so that it wakes on one core (a wake asks
    # for the cores of its last busy sample).
    h.step(60, {'v0': 0.05})
    assert len(h.agent.last_plan.vms['v0'].cores) == 1
    h.step(600, {'v0': 0.0})
    h.step(5, {'v0': 0.636})
    util = [h.agent.controller.vms['v0'].last_sample.util]
    missed = sum(h.step(5, {'v0': 0.636}).vms['v0'].violation_s
                 for _ in range(11))
    assert util[0] == pytest.approx(200.0)
    assert len(h.agent.last_plan.vms['v0'].cores) >= 3
    assert missed <= 5
