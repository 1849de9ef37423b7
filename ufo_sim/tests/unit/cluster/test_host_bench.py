"""The whole-host bench: a short run and its emulator-pool trace."""

import pytest

from ufo_sim.cluster import host_bench


def test_a_short_run_traces_the_emulator_pool(capsys):
    cost, bad, lc, held, vms, be = host_bench.run('ufo', 'surrogate', 32,
                                                  20, trace=10)
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            if line.startswith('RESULT pool_trace')]
    # 20 seconds asked, 20 run (not one 300-second epoch), a row each
    # 10 seconds.
    assert [r[4] for r in rows] == ['t=10', 't=20']
    fields = dict(f.split('=') for f in rows[-1][5:])
    assert int(fields['vms']) == vms > 0
    assert float(fields['emu_cpus']) > 0 and fields['busy'] == 'na'
    assert float(fields['rho_e']) > 0 and float(fields['demand']) > 0


def test_the_engine_pool_share_is_measured():
    host = host_bench.host_mod.ClusterHost('h0', 4, 2, 'default', seed=1)
    booted = host_bench.fill(host, 16)
    loads = {r.vm_id: 0.3 for r in booted}
    before = host_bench.pool_sample(host)
    host.step(2, loads)
    row = host_bench.pool_row(host, before, host_bench.pool_sample(host))
    assert row['pool_cpus'] == 8 and row['vms'] == len(booted)
    assert 0 < row['emu_cpus'] < row['busy'] * 8 <= 8


def _fields(capsys, *options):
    host_bench.main(['--vcpus', '32', '--hours', '0.0167', '--policies',
                     'ufo', '--fidelities', 'surrogate'] + list(options))
    line, = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith('RESULT host_cost')]
    return dict(f.split('=') for f in line.split()[2:])


def _held(capsys, *options):
    return float(_fields(capsys, *options)['cpus_held'])


def test_the_line_gives_the_best_effort_work(capsys):
    # The host's first VMs include busy BE ones, alone on an idle host.
    assert 85 < float(_fields(capsys)['be_work_pct']) <= 100


def test_ufo_options_reach_the_agent(capsys):
    # Parked VMs hold no core: a mark no VM reaches parks them all.
    paper = _held(capsys)
    parked = _held(capsys, '--ufo-option', 'idle_util=1000',
                   '--ufo-option', 'idle_after=2')
    assert parked < paper


def test_a_bad_ufo_option_names_itself(capsys):
    with pytest.raises(SystemExit):
        host_bench.main(['--ufo-option', 'idle_utl=5'])
    assert "'idle_utl=5': expected NAME=VALUE" in capsys.readouterr().err
