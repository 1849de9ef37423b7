"""ufo-bench agent --fake: the real agent over a fake host of guests."""

import argparse
import os
import re
import types

import pytest

from ufo_tools.bench import agent as bench_agent
from ufo_tools.bench import cli


def _args(*argv):
    parser = argparse.ArgumentParser()
    bench_agent.add_arguments(parser)
    return parser.parse_args(list(argv))


def _result(lines, key):
    [line] = [x for x in lines if x.startswith('RESULT') and key in x]
    return dict(kv.split('=') for kv in line.split()[1:])


@pytest.mark.parametrize('hang_calls', ['all', 'pins'])
def test_fake_run_prints_results_and_pins_the_guests(hang_calls):
    lines = []
    args = _args('--fake', '--guests', '5', '--ticks', '3', '--repeats',
                 '1', '--warmup', '6', '--interval', '0.05',
                 '--call-timeout', '0.2', '--hang-ticks', '3',
                 '--hang-calls', hang_calls)
    run = bench_agent.measure(args, 5, out=lines.append)

    figures = _result(lines, 'agent_cpu_ms_per_tick_median')
    assert figures['agent_fake_guests'] == '5'
    assert figures['managed'] == '5'
    for key in ('agent_cpu_ms_per_tick_median', 'agent_cpu_ms_per_s',
                'rss_mb', 'enforce_lag_ms_max',
                'libvirtd_cpu_ms_per_tick_median',
                'libvirt_calls_per_tick_median'):
        assert float(figures[key]) > 0 or key == 'enforce_lag_ms_max'
    hung = _result(lines, 'hung_guests=1')
    assert hung['call_deadline_ms'] == '200'
    assert hung['hang_calls'] == hang_calls
    # A tick that meets a hung call waits for its deadline, no longer
    # than a deadline and a tick's work (observing the guest meets none:
    # its NIC counters are asked for without waiting for its QEMU).
    assert float(hung['hung_tick_wall_ms_max']) < 1200
    assert float(hung['other_enforce_lag_ms_max']) < 1200

    host, plan = run.host, run.plan
    assert len(run.pinned) == 5
    emulator = plan.emulator_cpus
    for uuid, (vcpus, others) in run.pinned.items():
        # Each guest was narrowed from Nova's shared set to its pool.
        assert vcpus == plan.vms[uuid].cpus
        assert vcpus < host.managed and others == emulator
        assert not vcpus & emulator
    own = [cpus for cpus, _ in run.pinned.values()
           if cpus != plan.shared_cpus]
    assert sum(len(cpus) for cpus in own) == len(frozenset().union(*own))
    # The agent's stop gave every guest its definition back.
    assert set(run.released.values()) == {(host.managed, host.managed)}


def test_steps_add_up_the_agent_cpu_and_wall_of_each_step():
    lines = []
    args = _args('--fake', '--guests', '5', '--ticks', '3', '--repeats',
                 '2', '--warmup', '3', '--interval', '0.05',
                 '--hang-ticks', '0', '--steps')
    bench_agent.measure(args, 5, out=lines.append)
    [line] = [x for x in lines if x.startswith('agent CPU ms a tick by')]
    steps = dict(step.rpartition(' ')[::2]
                 for step in line.split(': ', 1)[1].split(', '))
    assert list(steps) == ['guests', 'observe', 'drift check', 'controller',
                           'enforcer', 'status']
    assert float(steps['observe']) > 0 and float(steps['controller']) > 0
    # Parts of the ticks' CPU: together about a tick's mean, not more.
    tick = float(_result(lines, 'agent_cpu_ms_per_tick_median')[
        'agent_cpu_ms_per_tick_median'])
    assert sum(float(v) for v in steps.values()) < 5 * tick

    # The wall of each step, and what of it waited for a CPU.
    [line] = [x for x in lines if x.startswith('tick wall ms a tick by')]
    steps, whole = line.split(': ', 1)[1].split('; whole tick ')
    walls = {}
    for step in steps.split(', '):
        name, wall, queued = re.fullmatch(
            r'(.+) ([\d.]+) \(([\d.]+)\)', step).groups()
        walls[name] = float(wall)
        assert float(queued) <= float(wall) + 0.01
    assert list(walls) == ['guests', 'observe', 'drift check', 'controller',
                           'enforcer', 'status', 'of it ack waits']
    assert walls['of it ack waits'] <= walls['enforcer']
    # The steps are parts of the tick: together no longer than it.
    tick = float(whole.split()[0])
    assert 0 < sum(walls.values()) - walls['of it ack waits'] <= tick
    result = _result(lines, 'tick_queued_ms_median')
    assert 0 <= float(result['tick_queued_ms_median']) <= float(
        result['tick_wall_ms_median'])
    assert 0 < float(result['tick_wall_less_queued_ms_median']) <= float(
        result['tick_wall_ms_median']) + 0.1


class _Preempting:
    """Holds the caller off a CPU for 1 ms before each clock read.

    The worst case for reading a run delay beside the wall clock.
    """

    def __init__(self):
        self.now = self.delay = 0.0

    def _preempt(self):
        self.now += 0.001
        self.delay += 0.001

    def monotonic(self):
        self._preempt()
        return self.now

    def queued(self):
        self._preempt()
        return self.delay


def test_a_wait_for_a_cpu_beside_a_read_is_inside_the_wall(monkeypatch):
    machine = _Preempting()
    monkeypatch.setattr(bench_agent.time, 'monotonic', machine.monotonic)
    monkeypatch.setattr(bench_agent._QueuedClock, '__call__',
                        lambda self: machine.queued())
    host = types.SimpleNamespace(
        guest_seconds=0.0, clock=lambda: 0.0, advance=lambda now: None,
        libvirt=types.SimpleNamespace(daemon_seconds=0.0, daemon_calls=0))

    def idle(*args):
        return None

    agent = types.SimpleNamespace(
        _sync_guests=idle, _observe=idle, _check_drift=idle,
        _update_status=idle, tick=idle,
        controller=types.SimpleNamespace(tick=idle),
        enforcer=types.SimpleNamespace(apply=idle, _wait=idle))
    steps = bench_agent._StepClock(agent, host)
    steps.on = True
    agent._observe()
    assert 0 < steps.waits['observe'] <= steps.walls['observe']

    ticker = bench_agent._Ticker(agent, host, interval=0.0)
    monkeypatch.setattr(bench_agent.time, 'sleep', lambda s: None)
    _, wall, _, _, _, queued = ticker.tick()
    assert 0 < queued <= wall


def test_guests_takes_a_count_or_a_list_of_counts():
    assert _args('--guests', '100,300').guests == [100, 300]
    for bad in ('0', 'x', '100,'):
        with pytest.raises(SystemExit):
            _args('--guests', bad)


def test_cli_offers_the_fake_host(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(['agent', '--help'])
    assert exc.value.code == 0
    assert re.search(r'--fake\b', capsys.readouterr().out)


def test_fake_libvirt_counts_what_libvirtd_answers(tmp_path):
    from ufo_tools.fakes import hypervisor
    host = hypervisor.FakeHypervisor(tmp_path, 2)
    lv = host.libvirt
    conn = lv.open('qemu:///system')
    dom = host.guests[0].domain
    conn.listAllDomains(0)
    dom.vcpuPinInfo(0)
    dom.UUIDString()            # local to the client: not a call
    assert lv.daemon_calls == 2
    busy = lv.daemon_seconds
    assert busy > 0
    # Time a call waits (a hung monitor) is nobody's CPU time.
    host.hang(host.guests[0], 0.2)
    dom.vcpuPinInfo(0)
    assert lv.daemon_calls == 3
    assert lv.daemon_seconds - busy < 0.05
    host.close()


def test_the_wait_for_hung_calls_after_the_ticks_is_no_stuck_loop(tmp_path):
    # After the hung guest's ticks the bench waits two deadlines for its
    # calls to return, without ticking: longer than the liveness window
    # (three ticks and a deadline), so a heartbeat still running would
    # report the loop stuck.
    log = tmp_path / 'agent.log'
    args = _args('--fake', '--guests', '2', '--ticks', '1', '--repeats',
                 '1', '--warmup', '2', '--interval', '0.02',
                 '--call-timeout', '0.6', '--hang-ticks', '1',
                 '--log', str(log))
    bench_agent.measure(args, 2, out=lambda line: None)
    assert 'No tick completed' not in log.read_text()


def test_two_runs_of_one_seed_pin_alike():
    # The fake guests follow the fake host's clock, not the machine's:
    # however the machine delays a run, one seed makes the same pins.
    def pins(seed):
        lines = []
        args = _args('--fake', '--guests', '6', '--ticks', '8',
                     '--repeats', '1', '--warmup', '0', '--interval',
                     '0.02', '--hang-ticks', '0', '--seed', str(seed))
        bench_agent.measure(args, 6, out=lines.append)
        [line] = [x for x in lines if x.startswith('repeat 1')]
        return re.search(r'(\d+) pins \(digest (\w+)\)', line).groups()

    first = pins(3)
    assert int(first[0]) > 0
    assert pins(3) == first


def test_fake_guests_answer_a_target_between_two_ticks(tmp_path):
    # A target the agent does not wait for (a grow, told last) is seen
    # by a real guest's module as it polls its page, and answered long
    # before the next tick: the fake's guests too, not only once the
    # next tick's clock has come.
    from ufo_agent.channel import host_channel
    from ufo_tools.fakes import hypervisor
    host = hypervisor.FakeHypervisor(tmp_path, 12, seed=3)
    try:
        guest = next(g for g in host.guests if g.module and g.vcpus > 1)
        channel = host_channel.HostChannel(
            os.path.join(host.shm, host_channel.shm_name(guest.uuid)),
            guest.vcpus)
        channel.initialize()
        host.advance(host.now + 1.0)        # the module binds its page
        seq = channel.set_target(1)
        # One tick later the guest has its vCPUs down: 25 ms a vCPU.
        host.advance(host.now + 1.0)
        sample = channel.read_guest().sample
        assert (sample.ack_target_seq, sample.online_vcpus) == (seq, 1)
        # In the enforcer's waits (5 ms each), a step of one vCPU is
        # answered 25 ms after it is seen, at the first of them.
        seq = channel.set_target(2)
        for _ in range(5):
            host.sleep(0.005)
        assert channel.read_guest().sample.ack_target_seq != seq
        host.sleep(0.005)
        assert channel.read_guest().sample.ack_target_seq == seq
        channel.close()
    finally:
        host.close()
