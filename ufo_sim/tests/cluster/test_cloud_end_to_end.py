"""``ufo-sim cluster`` end to end: real hosts, Nova, Watcher, local Ray.

A small cloud (3 hosts of 4 cores, a short day on the surrogate hosts)
so that CI runs it in well under two minutes on two cores.
"""

import csv
import json
import re

import pytest

from ufo_sim.cluster import cloud
from ufo_sim.cluster import workload
from ufo_sim import cmd

SMALL = ['--hosts', '3', '--cores', '4', '--hours', '0.5',
         '--warmup-hours', '0.1', '--vms-per-host', '10',
         '--fidelity', 'surrogate', '--no-plots']


def _results(out):
    return [line for line in out.splitlines() if line.startswith('RESULT')]


def test_cluster_command_on_local_ray(tmp_path, capsys):
    argv = ['cluster'] + SMALL + [
        '--policies', 'default,ufo-migrate', '--ratios', '2,8',
        '--processes', '2', '--out', str(tmp_path),
        '--strategy-option', 'sustain_s=120']
    assert cmd.main(argv) == 0
    out = capsys.readouterr().out
    lines = _results(out)
    assert [line.split()[3] for line in lines[:-1]] == [
        'policy=default@2', 'policy=default@8', 'policy=ufo-migrate@2',
        'policy=ufo-migrate@8']
    assert lines[-1].startswith('RESULT cluster_gain workload=generated ')
    saved = json.load(open(tmp_path / 'cluster.json'))
    by = {s['policy']: s for s in saved['summaries']}
    # The higher ratio hosts at least as many of the same requests.
    assert by['default@8']['vms_per_host'] >= by['default@2'][
        'vms_per_host'] > 0
    for s in by.values():
        assert s['lc_vm_hours'] > 0
        assert 0.0 <= s['lc_violation_share'] <= 1.0
        assert s['demand_vms'] >= s['vms_per_host'] * 3 - 1e-9
    assert by['default@2']['changes_per_vm_hour'] == 0.0
    # Nova's default holds every CPU of its 4-core SMT hosts.
    assert by['default@2']['held_cpus_per_host'] == 8.0
    assert by['ufo-migrate@2']['held_cpus_per_host'] <= 8.0
    series = saved['series']['ufo-migrate@8']
    assert len(series['t']) == 30
    # A policy with violation seconds names the VMs that carry them.
    named = [re.match(r'  most violation seconds \(LC VMs with any: '
                      r'(\d+)\): (g\d+) ', line)
             for line in out.splitlines()
             if line.startswith('  most violation seconds')]
    violating = [s for s in saved['summaries'] if s['violating_vms']]
    assert violating and all(named)
    assert [(int(m.group(1)), m.group(2)) for m in named] == [
        (s['violating_vms'], s['worst_vm']) for s in violating]
    for s in saved['summaries']:
        booked = saved['series'][s['policy']]['by_vm']
        assert len(booked) == s['violating_vms']
        if booked:
            assert s['worst_vm'] in booked


def test_same_figures_in_process_and_on_one_or_two_ray_workers():
    hosts = cloud.uniform_hosts(3, 4)
    params = workload.WorkloadParams()
    requests = workload.generate(params, 5, 900)[:40]
    config = cloud.CloudConfig(hosts=hosts, duration_s=900, step_s=60,
                               warmup_s=0, seed=5, fidelity='surrogate',
                               params=params)
    policies = [cloud.Policy('ufo-sched', 4.0)]
    runs = [cloud.run(config, policies, requests, workers=w)
            for w in (0, 2, 1)]
    first = runs[0]['ufo-sched@4']
    assert sum(first.hosted) > 0 and sum(first.lc_hosted) > 0
    assert runs[0] == runs[1] == runs[2]


def _vmtable(path, rows):
    with open(path, 'w', newline='') as f:
        csv.writer(f).writerows(rows)


def test_an_azure_trace_drives_the_cloud(tmp_path, capsys):
    # vmid, subscription, deployment, created, deleted, max, avg, p95,
    # category, cores, memory (GB): the V2 vmtable's columns.
    rows = []
    for i in range(24):
        category = ('Interactive', 'Delay-insensitive', 'Unknown')[i % 3]
        created = 0 if i < 12 else 300 * (i - 11)
        deleted = created + (600 if i % 4 == 0 else 100000)
        rows.append(['vm%02d' % i, 's', 'd', created, deleted, 90.0,
                     5.0 + i, 40.0 + i, category, (2, 4, 8)[i % 3],
                     (4, 8, 32)[i % 3]])
    trace = tmp_path / 'vmtable.csv'
    _vmtable(trace, rows)
    argv = ['cluster'] + SMALL + [
        '--trace', str(trace), '--policies', 'default,ufo-sched',
        '--ratios', '8', '--processes', '0', '--out', str(tmp_path)]
    assert cmd.main(argv) == 0
    lines = _results(capsys.readouterr().out)
    assert len(lines) == 3
    assert all(' workload=trace:vmtable.csv ' in line for line in lines)
    saved = json.load(open(tmp_path / 'cluster.json'))
    s = saved['series']['default@8']
    # Every trace VM alive through a step asked to be, and with room for
    # all at ratio 8 each was hosted: 12 from the start, then one every
    # 5 minutes, every fourth gone 10 minutes after its boot.
    assert s['demand'] == [sum(1 for r in rows if r[3] < t + 60 <= r[4])
                           for t in s['t']]
    assert s['demand'][0] == 12
    assert s['hosted'] == s['demand']
    assert sum(s['refused']) == 0
    assert s['lc_hosted'][0] == 4


def _recording_factory():
    """([hosts built], a host factory that records what it builds)."""
    from ufo_sim.cluster import host as host_mod
    built = []

    def factory(*args, **kwargs):
        built.append(host_mod.ClusterHost(*args, **kwargs))
        return built[-1]
    return built, factory


def test_ufo_options_reach_every_ufo_hosts_agent(tmp_path):
    # What-ifs of the agent's configuration on a cloud: the option is
    # handed to the hosts (by the factory, here recording what it built).
    from ufo_sim.commands import cluster
    built, factory = _recording_factory()
    args = cmd.parser().parse_args(['cluster'] + SMALL + [
        '--policies', 'default,ufo-sched', '--ratios', '2', '--processes',
        '0', '--ufo-option', 'be_policy="soak"', '--ufo-option',
        'pcu_high=0.9', '--out', str(tmp_path)])
    assert cluster.run(args, factory=factory) == 0
    assert [h.policy for h in built] == ['default'] * 3 + ['ufo'] * 3
    configs = [h.agent.controller.config for h in built[3:]]
    assert [(c.be_policy, c.pcu_high) for c in configs] == [
        ('soak', 0.9)] * 3
    assert json.load(open(tmp_path / 'cluster.json'))['summaries'][1][
        'policy'] == 'ufo-sched@2'


def test_a_bad_ufo_option_fails_before_any_host_runs(tmp_path, capsys):
    with pytest.raises(SystemExit) as raised:
        cmd.main(['cluster'] + SMALL + ['--ufo-option', 'no_such=1',
                                        '--out', str(tmp_path)])
    assert raised.value.code == 2
    assert 'no_such=1' in capsys.readouterr().err
    with pytest.raises(SystemExit) as raised:
        cmd.main(['cluster'] + SMALL + ['--ufo-option', 'be_policy="x"',
                                        '--processes', '0',
                                        '--out', str(tmp_path)])
    assert 'be_policy must be one of' in str(raised.value.code)
    assert not (tmp_path / 'cluster.json').exists()


def _placements_seeing_signals(monkeypatch, extra):
    from ufo_nova import cache
    from ufo_nova import listener
    from ufo_sim.cluster import nova_scheduler
    seen = []
    monkeypatch.undo()      # one watcher at a time
    select = nova_scheduler.NovaScheduler.select

    def watched(self, uuid, flavor):
        snap = listener.get_cache().snapshot()
        seen.append(any(snap.lookup(h).state != cache.UNKNOWN
                        for h in self.hosts))
        return select(self, uuid, flavor)
    monkeypatch.setattr(nova_scheduler.NovaScheduler, 'select', watched)
    argv = ['cluster', '--hosts', '3', '--cores', '4', '--hours', '0.4',
            '--warmup-hours', '0.2', '--vms-per-host', '10',
            '--fidelity', 'surrogate', '--no-plots', '--processes', '0',
            '--policies', 'ufo-sched', '--ratios', '4'] + extra
    assert cmd.main(argv) == 0
    return seen


def test_a_spread_start_places_the_first_vms_with_the_hosts_signals(
        monkeypatch, tmp_path):
    blind = _placements_seeing_signals(
        monkeypatch, ['--out', str(tmp_path / 'a')])
    spread = _placements_seeing_signals(
        monkeypatch, ['--out', str(tmp_path / 'b'),
                      '--start-spread-minutes', '10'])
    # All in the first second: no placement sees a host's signal.
    assert len(blind) > 20 and not any(blind)
    # Over ten steps: all but the first step's see the hosts'.
    assert len(spread) == len(blind)
    assert sum(spread) >= len(spread) - len(spread) // 10 - 1


def test_a_spread_longer_than_the_warm_up_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        cmd.main(['cluster'] + SMALL + ['--policies', 'default',
                                        '--ratios', '2',
                                        '--start-spread-minutes', '7'])
    assert '--start-spread-minutes must be between 0 and the warm-up ' \
        '(6 minutes)' in str(exc.value)


def test_qos_target_mode_reaches_the_ufo_hosts_and_lines(tmp_path, capsys):
    from ufo_sim.commands import cluster
    built, factory = _recording_factory()
    args = cmd.parser().parse_args(['cluster'] + SMALL + [
        '--policies', 'default,ufo', '--ratios', '2', '--processes', '0',
        '--qos-target', '--out', str(tmp_path)])
    assert cluster.run(args, factory=factory) == 0
    assert [h.qos_target for h in built] == [False] * 3 + [True] * 3
    targets = [g.latency_target_us for h in built[3:]
               for g in h.driver.guests() if g.vm_class == 'lc']
    assert targets and all(t > 0 for t in targets)
    lines = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith('RESULT cluster ')]
    assert ['qos_target=on' in line for line in lines] == [False, True]
