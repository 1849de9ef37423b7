"""One cloud host run again on each host model (``ufo_sim.cluster.replay``).

Real hosts (the surrogate and the engine), Nova's placement, a small
cloud of hand-made VMs so that the host's set and loads are known.
"""

import pytest

from ufo_sim.cluster import cloud
from ufo_sim.cluster import replay
from ufo_sim.cluster import workload


def _vm(name, arrive, vcpus, load, lc=True):
    return workload.VmRequest(
        vm_id=name, arrive_s=float(arrive), lifetime_s=1e6, vcpus=vcpus,
        memory_mb=1024 * vcpus, lc=lc, pattern='diurnal', mean_load=load,
        peak_load=min(1.0, 1.5 * load), phase_s=0.0, seed=7)


REQUESTS = [_vm('a%d' % i, 0, 2, 0.3 + 0.1 * i) for i in range(4)] + \
    [_vm('b0', 0, 4, 0.0, lc=False), _vm('late', 180, 2, 0.5)]


def _config(**kw):
    return cloud.CloudConfig(
        hosts=cloud.uniform_hosts(2, 4), duration_s=900, step_s=60,
        warmup_s=0, params=workload.WorkloadParams(), fidelity='surrogate',
        **kw)


def test_a_window_is_the_hosts_vms_and_the_loads_the_cloud_offered():
    config = _config()
    policy = cloud.Policy('ufo-sched', 2.0)
    window = replay.capture(config, policy, REQUESTS, 'host000', 120, 120)
    ids = [r.vm_id for r in window.requests]
    assert ids and 'late' not in ids        # it boots at 180 s
    assert window.start_s == 120
    assert len(window.loads) == len(window.ran) == 2
    for k, loads in enumerate(window.loads):
        t = window.start_s + 60 * k
        assert set(loads) == set(ids)
        for r in window.requests:
            assert loads[r.vm_id] == pytest.approx(
                workload.load_at(r, max(t, r.arrive_s), config.params))
    # The other host holds the rest of what was booted by then.
    other = replay.capture(config, policy, REQUESTS, 'host001', 120, 60)
    assert not set(ids) & {r.vm_id for r in other.requests}
    assert set(ids) | {r.vm_id for r in other.requests} == {
        r.vm_id for r in REQUESTS if r.arrive_s <= 120}


@pytest.mark.parametrize('kind', ['default', 'ufo-sched'])
def test_a_host_replayed_from_the_start_is_the_cloud_host_again(kind):
    # The window opens when the cloud boots its first VMs: the replayed
    # surrogate host runs the very seconds the cloud's did.
    config = _config(ufo_config=(('be_policy', 'soak'),))
    policy = cloud.Policy(kind, 2.0)
    window = replay.capture(config, policy, REQUESTS, 'host000', 0, 180)
    assert window.start_s == 0 and len(window.ran) == 3
    steps, _, host = replay.replay(window, config, policy, 'surrogate')
    assert steps == window.ran
    ids = window.vm_ids()
    assert replay.lc_seconds(steps, ids) == 180 * sum(
        r.lc for r in window.requests) > 0
    if kind == 'ufo-sched':
        assert host.agent.controller.config.be_policy == 'soak'
        # The agent ran and gave cores: the same acts as the cloud's.
        plan = host.agent.last_plan
        assert any(vm.cores for vm in plan.vms.values())


def test_the_engine_runs_the_same_window():
    config = _config()
    policy = cloud.Policy('ufo', 2.0)
    window = replay.capture(config, policy, REQUESTS, 'host001', 60, 60)
    ids = window.vm_ids()
    surrogate, _, _ = replay.replay(window, config, policy, 'surrogate')
    engine, _, host = replay.replay(window, config, policy, 'engine')
    assert host.fidelity == 'engine'
    assert replay.lc_seconds(engine, ids) == replay.lc_seconds(
        surrogate, ids) == 60 * sum(r.lc for r in window.requests) > 0
    assert set(replay.violations(engine, ids)) <= ids


def _lc_targets(host):
    return [g.latency_target_us for g in host.driver.guests()
            if g.vm_class == 'lc']


@pytest.mark.parametrize('cloud_mode', [False, True])
def test_a_window_is_replayed_with_the_agent_in_either_mode(cloud_mode):
    # The VMs and loads the cloud gave the host, whatever the mode its
    # own agents ran in; None keeps the cloud's.
    config = _config(qos_target=cloud_mode)
    policy = cloud.Policy('ufo-sched', 2.0)
    window = replay.capture(config, policy, REQUESTS, 'host000', 120, 60)
    ids = window.vm_ids()
    for mode, want in [(None, cloud_mode), (False, False), (True, True)]:
        steps, _, host = replay.replay(window, config, policy, 'surrogate',
                                       qos_target=mode)
        assert host.qos_target is want
        targets = _lc_targets(host)
        assert targets and all(
            (t is not None and t > 0) if want else t is None
            for t in targets)
        assert replay.lc_seconds(steps, ids) == 60 * sum(
            r.lc for r in window.requests) > 0


def test_settling_runs_the_first_loads_first_and_counts_the_window():
    config = _config(ufo_config=(('be_policy', 'soak'),))
    policy = cloud.Policy('ufo-sched', 2.0)
    window = replay.capture(config, policy, REQUESTS, 'host000', 120, 120)
    ids = window.vm_ids()
    plain, _, fresh = replay.replay(window, config, policy, 'surrogate')
    settled, _, host = replay.replay(window, config, policy, 'surrogate',
                                     settle_s=90)
    assert len(settled) == len(plain) == len(window.loads) == 2
    assert host.now == pytest.approx(fresh.now + 90)
    assert replay.lc_seconds(settled, ids) == replay.lc_seconds(
        plain, ids) == 120 * sum(r.lc for r in window.requests) > 0


def test_a_host_or_a_time_outside_the_cloud_is_refused():
    config = _config()
    policy = cloud.Policy('default', 2.0)
    with pytest.raises(ValueError, match='no host .host009. in the cloud'):
        replay.capture(config, policy, REQUESTS, 'host009', 0, 60)
    with pytest.raises(ValueError, match='outside the cloud'):
        replay.capture(config, policy, REQUESTS, 'host000', 900, 60)


def test_the_command_wants_one_policy_at_one_ratio(capsys):
    with pytest.raises(SystemExit) as exc:
        replay.main(['--host', 'host000', '--at', '0', '--',
                     '--hosts', '2', '--cores', '4', '--hours', '0.1',
                     '--policies', 'default,ufo', '--ratios', '2'])
    assert exc.value.code == 2
    assert 'one policy at one ratio' in capsys.readouterr().err


# A small cloud replayed on the surrogate, after the window's options.
SMALL_CLOUD = ['--seconds', '60', '--fidelities', 'surrogate', '--',
               '--hosts', '2', '--cores', '4', '--hours', '0.2',
               '--warmup-hours', '0', '--vms-per-host', '6',
               '--policies', 'ufo-sched', '--ratios', '2']


def test_the_command_prints_the_cloud_and_each_model(capsys):
    assert replay.main(['--host', 'host000', '--at', '120'] +
                       SMALL_CLOUD) == 0
    lines = [x for x in capsys.readouterr().out.splitlines()
             if x.startswith('RESULT replay')]
    assert [x.split()[4] for x in lines] == [
        'fidelity=cloud:surrogate', 'fidelity=surrogate']
    for line in lines:
        fields = dict(f.split('=', 1) for f in line.split()[2:])
        assert fields['host'] == 'host000'
        assert int(fields['lc_s']) >= 0
        assert 0.0 <= float(fields['violation_pct']) <= 100.0


def test_the_command_replays_each_agent_mode_it_is_given(capsys):
    assert replay.main(['--windows', '2', '--agent-modes',
                        'black-box,qos-target'] + SMALL_CLOUD) == 0
    out = capsys.readouterr().out.splitlines()
    lines = [dict(f.split('=', 1) for f in x.split()[2:]) for x in out
             if x.startswith('RESULT replay ')]
    totals = [dict(f.split('=', 1) for f in x.split()[2:]) for x in out
              if x.startswith('RESULT replay_total')]
    assert [(x['fidelity'], x['agent']) for x in lines] == [
        ('cloud:surrogate', 'black-box'), ('surrogate', 'black-box'),
        ('surrogate', 'qos-target')] * 2
    assert [(t['fidelity'], t['agent']) for t in totals] == [
        ('cloud:surrogate', 'black-box'), ('surrogate', 'black-box'),
        ('surrogate', 'qos-target')]
    for total in totals:
        mine = [x for x in lines if (x['fidelity'], x['agent']) ==
                (total['fidelity'], total['agent'])]
        assert int(total['lc_s']) == sum(int(x['lc_s']) for x in mine) > 0
        assert int(total['violation_s']) == sum(
            int(x['violation_s']) for x in mine)


@pytest.mark.parametrize('policy,modes,error', [
    ('ufo-sched', 'black-box,exact', "'exact' is not one of black-box, "
                                     "qos-target"),
    ('ufo-sched', 'qos-target,qos-target', 'a mode is named twice'),
    ('default', 'qos-target', 'default@2 runs no UFO agent')])
def test_an_agent_mode_the_host_cannot_run_is_refused(policy, modes, error,
                                                      capsys):
    with pytest.raises(SystemExit) as exc:
        replay.main(['--host', 'host000', '--at', '0', '--agent-modes',
                     modes, '--', '--policies', policy, '--ratios', '2'])
    assert exc.value.code == 2
    assert error in capsys.readouterr().err


def test_unknown_fidelity_is_refused(capsys):
    with pytest.raises(SystemExit):
        replay.main(['--host', 'host000', '--at', '0', '--fidelities',
                     'exact', '--', '--policies', 'ufo', '--ratios', '2'])
    assert "'exact' is not one of" in capsys.readouterr().err


def test_windows_taken_in_one_run_are_each_as_taken_alone():
    config = _config()
    policy = cloud.Policy('ufo-sched', 2.0)
    picks = [('host001', 60), ('host000', 120), ('host000', 180)]
    together = replay.capture_all(config, policy, REQUESTS, picks, 60)
    for (host, at), window in zip(picks, together):
        alone = replay.capture(config, policy, REQUESTS, host, at, 60)
        assert (window.host, window.start_s) == (host, at)
        assert [r.vm_id for r in window.requests] == \
            [r.vm_id for r in alone.requests]
        assert window.loads == alone.loads
        assert window.ran == alone.ran


def test_random_windows_are_drawn_after_the_warm_up():
    config = cloud.CloudConfig(
        hosts=cloud.uniform_hosts(3, 4), duration_s=3600, step_s=60,
        warmup_s=600, params=workload.WorkloadParams())
    picks = replay.pick_windows(config, 50, 300, seed=4)
    assert picks == replay.pick_windows(config, 50, 300, seed=4)
    assert picks != replay.pick_windows(config, 50, 300, seed=5)
    assert {host for host, _ in picks} == {'host000', 'host001',
                                           'host002'}
    assert all(600 <= at <= 3300 for _, at in picks)


def test_the_command_totals_random_windows(capsys):
    assert replay.main(['--windows', '2', '--window-seed', '3'] +
                       SMALL_CLOUD) == 0
    out = capsys.readouterr().out.splitlines()
    lines = [dict(f.split('=', 1) for f in x.split()[2:]) for x in out
             if x.startswith('RESULT replay ')]
    totals = [dict(f.split('=', 1) for f in x.split()[2:]) for x in out
              if x.startswith('RESULT replay_total')]
    assert len(lines) == 4
    assert [t['fidelity'] for t in totals] == ['cloud:surrogate',
                                               'surrogate']
    assert {t['settle_s'] for t in totals} == {'0'}
    for total in totals:
        mine = [x for x in lines if x['fidelity'] == total['fidelity']]
        assert total['windows'] == '2'
        assert int(total['lc_s']) == sum(int(x['lc_s']) for x in mine) > 0
        assert int(total['violation_s']) == sum(
            int(x['violation_s']) for x in mine)


@pytest.mark.parametrize('argv', [
    ['--host', 'host000'],
    ['--host', 'host000', '--at', '0', '--windows', '2'],
    ['--windows', '0']])
def test_the_command_wants_one_window_or_a_count(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        replay.main(argv + ['--', '--policies', 'ufo', '--ratios', '2'])
    assert exc.value.code == 2
    assert '--windows' in capsys.readouterr().err


@pytest.mark.parametrize('value', ['-1', 'nan', 'inf'])
def test_a_settle_that_is_no_length_is_refused(value, capsys):
    with pytest.raises(SystemExit) as exc:
        replay.main(['--windows', '1', '--settle', value, '--',
                     '--policies', 'ufo', '--ratios', '2'])
    assert exc.value.code == 2
    assert '--settle must be' in capsys.readouterr().err
