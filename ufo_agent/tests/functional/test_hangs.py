"""ufo-agent's lifecycle under hangs, a second agent and SIGHUP.

Real libvirt, real QEMU (TCG), real guests with the ufo_guest module; the
agent is the real command, observed from outside (/status, its log,
libvirt's live pins, the guests' own view). Tests run in file order on
two guests: ``web`` (two vCPUs, a light LC workload, a 3 s watchdog) and
``stuck`` (one vCPU), whose QEMU process is stopped with SIGSTOP in the
last test: libvirt calls that need its monitor, or the job held by one
that does, then wait until it continues.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from ufo_agent.cmd import agent as cmd_agent
from ufo_agent.service import pidlock
from ufo_tools.e2e import AgentProcess
from ufo_tools.e2e import free_port
from ufo_tools.e2e import live_pins
from ufo_tools.e2e import nova_guest
from ufo_tools.e2e import vm_status
from ufo_tools import testguest

WATCHDOG_MS = 3000
CALL_TIMEOUT = 3.0


@pytest.fixture(scope='module')
def web(guest_artifacts):
    with nova_guest(watchdog_ms=WATCHDOG_MS,
                    cmdline='ufo.rate=300 ufo.svc_us=500 ufo.workers=2') as g:
        yield g


@pytest.fixture(scope='module')
def stuck(guest_artifacts, web):
    with nova_guest(vcpus=1, name='e2e-stuck', cmdline='') as g:
        yield g


def cpus_of(text):
    return frozenset(int(c) for c in text.split(',') if c)


def managed(uuid, online=None):
    def check(status):
        vm = vm_status(status, uuid)
        return vm is not None and vm['signal'] == 'guest' and (
            online is None or vm['online_vcpus'] == online)
    return check


def _agent_cmd(agent, *extra, conf=None):
    return [sys.executable, '-m', 'ufo_agent.cmd.agent', '--config-file',
            str(conf or agent.conf)] + list(extra)


def _run(cmd, timeout=60):
    """Run a command; a refusal returns, an agent that runs is killed."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        pytest.fail('%s kept running instead of being refused:\n%s'
                    % (' '.join(cmd[2:]), err[-3000:]))
    return proc.returncode, err


def test_a_second_agent_and_restore_are_refused_while_one_runs(
        web, tmp_path):
    uuid = web.dom.UUIDString()
    agent = AgentProcess(tmp_path).start()
    try:
        agent.wait(managed(uuid, online=1), what='web managed')
        lock = pidlock.host_lock_path()
        # The same host, its own configuration file, state directory and
        # metrics port: only the host-wide lock keeps it from managing
        # the same guests.
        other = tmp_path / 'other.conf'
        other.write_text(agent.conf.read_text().replace(
            'metrics_port = %d' % agent.port,
            'metrics_port = %d' % free_port()).replace(
            str(agent.state), str(tmp_path / 'other-state')))
        rc, err = _run(_agent_cmd(agent, conf=other))
        assert rc == cmd_agent.EXIT_FAILURE, err
        assert ('another ufo-agent (pid %d) is running on this host: it '
                'holds %s' % (agent.proc.pid, lock)) in err
        rc, err = _run(_agent_cmd(agent, '--restore'))
        assert rc == cmd_agent.EXIT_FAILURE, err
        assert ('not restoring: ufo-agent (pid %d) is running and holds %s'
                % (agent.proc.pid, lock)) in err
        # The first agent runs on and its guest was not given back.
        ticks = agent.status()['ticks']
        agent.wait(lambda s: s['ticks'] >= ticks + 3 and
                   managed(uuid, online=1)(s), what='ticks go on')
        assert web.online_cpus() == {0}
        assert 'Restored guest' not in agent.log_text()
        assert agent.signal(signal.SIGTERM) == 0
    finally:
        agent.stop(signal.SIGKILL)
    # With the agent gone, --restore takes the lock and runs.
    rc, err = _run(_agent_cmd(agent, '--restore'))
    assert rc == 0, err


def test_sighup_reloads_mutable_options_and_keeps_the_guest(web, tmp_path):
    uuid = web.dom.UUIDString()
    agent = AgentProcess(tmp_path, agent__ack_wait='0.3').start()
    try:
        status = agent.wait(managed(uuid, online=1), what='web managed')
        vm = vm_status(status, uuid)
        pins = live_pins(web)
        assert pins[0] == {cpus_of(vm['cpus'])}
        text = agent.conf.read_text()
        assert 'ack_wait = 0.3\n' in text
        agent.conf.write_text(text.replace('ack_wait = 0.3\n',
                                           'ack_wait = 0.2\n') +
                              '[DEFAULT]\ndebug = true\n')
        mark = len(agent.log_text())
        agent.proc.send_signal(signal.SIGHUP)
        # (An agent that SIGHUP killed fails here: it no longer runs.)
        status = agent.wait(
            lambda s: s['config']['agent']['ack_wait'] == 0.2,
            what='the new ack_wait in use')
        ticks = status['ticks']
        agent.wait(lambda s: s['ticks'] >= ticks + 3, what='ticks go on')
        log = agent.log_text()[mark:]
        assert 'Configuration reloaded: agent.ack_wait 0.3 -> 0.2' in log
        assert ' DEBUG ' in log                  # [DEFAULT] debug applied
        assert 'Released' not in log and 'Managing guest' not in log
        # The guest stayed managed, on the same pins.
        status = agent.wait(managed(uuid, online=1), what='web managed')
        assert vm_status(status, uuid)['cpus'] == vm['cpus']
        assert live_pins(web) == pins
        assert web.online_cpus() == {0}
        assert agent.signal(signal.SIGTERM) == 0
    finally:
        agent.stop(signal.SIGKILL)


def _qemu_pid(guest):
    with open('/run/libvirt/qemu/%s.pid' % guest.name) as handle:
        return int(handle.read().strip())


def _virsh(*args, **kwargs):
    return subprocess.run(['virsh', '-c', testguest.LIBVIRT_URI] +
                          list(args), capture_output=True, text=True,
                          timeout=60, **kwargs)


def test_a_stopped_qemu_stalls_neither_the_agent_nor_the_other_guests(
        web, stuck, tmp_path):
    web_uuid, stuck_uuid = web.dom.UUIDString(), stuck.dom.UUIDString()
    agent = AgentProcess(
        tmp_path, agent__drift_check_interval='2',
        agent__libvirt_call_timeout=str(CALL_TIMEOUT)).start()
    try:
        _stopped_qemu(agent, web, stuck, web_uuid, stuck_uuid)

        def converged(status):
            vm = vm_status(status, stuck_uuid)
            return vm is not None and \
                live_pins(stuck)[0] == {cpus_of(vm['cpus'])}

        # Everything converges: the call returns, the guest is pinned again.
        agent.wait(converged, what='the stopped guest pinned again',
                   timeout=120)
        assert 'returned after' in agent.log_text()
        # The other guest is managed from its own page again. Around the
        # stall its claims may pass the crosscheck's bound by a hair for
        # a few ticks (a TCG vCPU thread asleep on QEMU's lock is busy to
        # the guest), and host-only is the safe answer to that; the loop
        # in _stopped_qemu checked it every half second meanwhile.
        agent.wait(managed(web_uuid), what='web managed again', timeout=30)
        assert agent.signal(signal.SIGTERM) == 0
    finally:
        agent.stop(signal.SIGKILL)


def _stopped_qemu(agent, web, stuck, web_uuid, stuck_uuid):
    """Stop the QEMU of ``stuck`` for a while; check the agent meanwhile."""
    pid = _qemu_pid(stuck)
    monitor = None
    agent.wait(lambda s: managed(web_uuid)(s) and managed(stuck_uuid)(s),
               what='both guests managed', timeout=120)
    fires = web.module_state()['watchdog_fires']
    web_target = vm_status(agent.status(), web_uuid)['target_vcpus']
    try:
        # The guest hangs: its QEMU stops, and a monitor command that will
        # not be answered holds its libvirt job. Its pins are changed
        # first, so that the agent's drift check must pin it again.
        os.kill(pid, signal.SIGSTOP)
        every = ','.join(str(c) for c in sorted(os.sched_getaffinity(0)))
        pin = _virsh('vcpupin', stuck.name, '0', every, '--live')
        assert pin.returncode == 0, pin.stderr
        monitor = subprocess.Popen(
            ['virsh', '-c', testguest.LIBVIRT_URI, 'qemu-monitor-command',
             stuck.name, json.dumps({'execute': 'query-status'})],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3)
        # For 20 s: the agent answers and ticks, the other guest is
        # managed and its heartbeat never stops.
        start = agent.status()
        slowest, deadline = 0.0, time.monotonic() + 20
        while time.monotonic() < deadline:
            before = time.monotonic()
            status = agent.poll()
            assert time.monotonic() - before < 2.0, '/status was slow'
            slowest = max(slowest, status['tick_seconds'])
            assert managed(web_uuid)(status), status
            assert vm_status(status, stuck_uuid) is not None
            time.sleep(0.5)
        assert status['ticks'] - start['ticks'] >= 10, (start, status)
        assert slowest < CALL_TIMEOUT + 2.0
        assert web.module_state()['watchdog_fires'] == fires
        if web_target < 2:
            assert web.online_cpus() == set(range(web_target))
        log = agent.log_text()
        # Abandoned: a pin or pin read after [agent] libvirt_pin_wait, any
        # other call after the whole deadline; whichever met the stop.
        assert re.search(r'libvirt call [^\n]*%s[^\n]*(timed out after '
                         r'%.1f s|left in flight after)'
                         % (stuck_uuid, CALL_TIMEOUT), log), log[-3000:]
        assert 'while an earlier call has not returned' in log
    finally:
        os.kill(pid, signal.SIGCONT)
        if monitor is not None:
            try:
                monitor.wait(60)
            except subprocess.TimeoutExpired:
                monitor.kill()
