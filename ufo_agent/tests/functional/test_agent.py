"""ufo-agent end to end: the real command, real libvirt, a real guest.

The guest carries Nova's ``<nova:instance>`` metadata (set live, as Nova
writes it into the domain XML) and runs the LC workload. ufo-agent runs as
a subprocess with its own configuration and is observed from outside:
its /status endpoint, libvirt's pin information and the guest's own view
of its online CPUs. Tests run in file order on one guest. The agent runs
as an unprivileged user in the libvirt and kvm groups (``agent_user``),
as the packaged systemd unit runs it.
"""

import functools
import grp
import os
import random
import re
import signal
import subprocess
import threading
import time

import pytest

from ufo_agent.cmd import agent as cmd_agent
from ufo_tools.e2e import AgentProcess
from ufo_tools.e2e import free_port
from ufo_tools.e2e import host_online_cpus
from ufo_tools.e2e import live_pins
from ufo_tools.e2e import nova_guest
from ufo_tools.e2e import vm_status
from ufo_tools.e2e import wait_guest_online
from ufo_tools import testguest

VCPUS = 2
WATCHDOG_MS = 3000


@pytest.fixture
def agent_process(agent_user, tmp_path):
    """``AgentProcess`` in tmp_path, as the unprivileged agent user."""
    return functools.partial(AgentProcess, tmp_path, user=agent_user)


@pytest.fixture(scope='module')
def guest(guest_artifacts):
    with nova_guest(watchdog_ms=WATCHDOG_MS,
                    cmdline='ufo.rate=300 ufo.svc_us=500 ufo.workers=2') as g:
        yield g


def test_agent_manages_the_nova_guest_and_sigterm_restores_it(
        guest, agent_process, agent_user):
    uuid = guest.dom.UUIDString()
    agent = agent_process().start()
    try:
        status = agent.wait(
            lambda s: (vm_status(s, uuid) or {}).get('signal') == 'guest',
            what='the guest channel')
        # Not root: the agent's user, its page shared with QEMU by group.
        assert os.stat('/proc/%d' % agent.proc.pid).st_uid == agent_user.uid
        page = os.stat('/dev/shm/ufo-' + uuid)
        assert (page.st_uid, page.st_gid, page.st_mode & 0o777) == (
            agent_user.uid, grp.getgrnam('kvm').gr_gid, 0o660)
        vm = vm_status(status, uuid)
        assert vm['name'] == 'e2e-web' and vm['vcpus'] == VCPUS
        # The guest follows its allocation: #vCPUs == #pCPUs.
        status = agent.wait(lambda s: vm_status(s, uuid)['online_vcpus'] ==
                            vm_status(s, uuid)['target_vcpus'],
                            what='the guest to follow its target')
        vm = vm_status(status, uuid)
        pools = status['pools']
        vcpu_pins, emulator_pins = live_pins(guest)
        assert len(vcpu_pins) == 1
        cpus = set(next(iter(vcpu_pins)))
        assert cpus == {int(c) for c in vm['cpus'].split(',')}
        assert emulator_pins == set(pools['emulator_cpus'])
        assert not cpus & emulator_pins
        assert len(guest.online_cpus()) == vm['target_vcpus']
        assert os.path.exists('/dev/shm/ufo-' + uuid)
        assert agent.signal(signal.SIGTERM) == 0
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()
    # Fail-safe: every vCPU online, pins back to what the domain had.
    assert wait_guest_online(guest, set(range(VCPUS))) == set(range(VCPUS))
    vcpu_pins, emulator_pins = live_pins(guest)
    host = frozenset(host_online_cpus())
    assert vcpu_pins == {host} and emulator_pins == host
    assert (agent.state / (uuid + '.json')).exists()
    assert 'Released 1 guests (0 failed)' in agent.log.read_text(), \
        'another Nova guest is running here: %s' % agent.log.read_text()


def test_pins_changed_behind_the_agent_are_applied_again(guest, agent_process):
    uuid = guest.dom.UUIDString()
    agent = agent_process(agent__drift_check_interval='2').start()
    try:
        status = agent.wait(lambda s: (vm_status(s, uuid) or {}).get(
            'online_vcpus') == 1, what='managed')
        want = {int(c) for c in vm_status(status, uuid)['cpus'].split(',')}
        subprocess.run(['virsh', '-c', testguest.LIBVIRT_URI, 'vcpupin',
                        guest.name, '0', ','.join(
                            str(c) for c in sorted(host_online_cpus())),
                        '--live'], check=True, capture_output=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            vcpu_pins, _ = live_pins(guest)
            if vcpu_pins == {frozenset(want)}:
                break
            time.sleep(0.5)
        assert live_pins(guest)[0] == {frozenset(want)}
        assert 'changed behind ufo-agent' in agent.log.read_text()
    finally:
        agent.signal(signal.SIGTERM)


def test_unreachable_broker_does_not_stall_the_agent(guest, agent_process):
    # Notifications to a port nobody listens on: each send blocks for
    # seconds, longer than the guests' heartbeat watchdog.
    uuid = guest.dom.UUIDString()
    agent = agent_process(
        publishers__enabled='notification',
        publishers__keepalive_interval='2',
        oslo_messaging_notifications__transport_url=(
            'rabbit://guest:guest@127.0.0.1:%d/' % free_port())).start()
    try:
        agent.wait(lambda s: (vm_status(s, uuid) or {}).get(
            'online_vcpus') == 1, what='managed')
        start = agent.status()
        slowest = 0.0
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            status = agent.status()
            slowest = max(slowest, status['tick_seconds'])
            assert vm_status(status, uuid)['online_vcpus'] == 1
            time.sleep(0.5)
        assert status['ticks'] - start['ticks'] >= 12
        assert slowest < 0.5
        assert guest.online_cpus() == {0}
        assert 'ufo.host.signal' in agent.log.read_text() or \
            'Connection refused' in agent.log.read_text()
    finally:
        agent.signal(signal.SIGTERM)


def test_sigkill_then_watchdog_then_restart_reconciles(guest, agent_process):
    uuid = guest.dom.UUIDString()
    # Saved every second, so a crash loses at most one second of learning.
    agent = agent_process(agent__state_save_interval='1').start()
    try:
        agent.wait(lambda s: (vm_status(s, uuid) or {}).get(
            'online_vcpus') == 1, what='one vCPU online')
        assert guest.online_cpus() == {0}
        agent.wait(lambda s: (agent.state / (uuid + '.json')).exists(),
                   what='learned state on disk')
        agent.proc.kill()
        agent.proc.wait(30)
        # No heartbeat: the guest module brings every vCPU back.
        start = time.monotonic()
        assert wait_guest_online(
            guest, set(range(VCPUS)),
            timeout=WATCHDOG_MS / 1000.0 + 30) == set(range(VCPUS))
        assert time.monotonic() - start < WATCHDOG_MS / 1000.0 + 30
        # The next start finds the guest and applies its plan again.
        again = agent_process().start()
        try:
            again.wait(lambda s: (vm_status(s, uuid) or {}).get(
                'online_vcpus') == 1, what='reconciliation')
            assert guest.online_cpus() == {0}
            log = again.log.read_text()
            assert 'learned state restored' in log
        finally:
            again.signal(signal.SIGTERM)
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()


def test_restore_after_a_crash_gives_the_guest_back(guest, agent_process):
    """The unit's ExecStopPost after SIGKILL: --restore as the agent user.

    Meanwhile the configuration got the placement publisher with a
    [placement] section that cannot work: the guest is restored all the
    same, and restore attaches no channel of its own.
    """
    uuid = guest.dom.UUIDString()
    agent = agent_process().start()
    try:
        agent.wait(lambda s: (vm_status(s, uuid) or {}).get(
            'online_vcpus') == 1, what='one vCPU online')
        vcpu_pins, _ = live_pins(guest)
        host = frozenset(host_online_cpus())
        assert vcpu_pins != {host}
    finally:
        agent.proc.kill()
        agent.proc.wait(30)
    shmems = guest.dom.XMLDesc(0).count('<shmem ')
    agent.conf.write_text(agent.conf.read_text().replace(
        '[publishers]\nenabled = \n', '[publishers]\nenabled = placement\n')
        + '[placement]\nauth_type = no-such-plugin\n')
    assert 'enabled = placement' in agent.conf.read_text()
    done = agent.restore()
    assert done.returncode == 0, done.stderr + agent.log_text()[-3000:]
    # The pins come back from --restore alone (the guest's watchdog only
    # brings its vCPUs back), and no second channel was attached.
    vcpu_pins, emulator_pins = live_pins(guest)
    assert vcpu_pins == {host} and emulator_pins == host
    assert wait_guest_online(guest, set(range(VCPUS))) == set(range(VCPUS))
    assert guest.dom.XMLDesc(0).count('<shmem ') == shmems == 1
    log = agent.log_text()
    assert 'Restored guest %s' % uuid in log
    assert 'Could not clear trait CUSTOM_UFO_OVERLOADED' in log


@pytest.mark.parametrize('options,message', [
    ({'controller__pcu_low': '0.9'},
     r'\[controller\] pcu_low must be below pcu_high'),
    ({'host_cpus__managed_cpus': '0-4095'},
     r'\[host_cpus\] managed_cpus lists CPUs'),
    ({'controller__sf_threshold': '2'}, 'sf_threshold'),
    ({'host_cpus__reserved_cpus': 'x'},
     r'\[host_cpus\] reserved_cpus: invalid'),
    ({'host_cpus__managed_cpus': ''},
     r'\[host_cpus\] managed_cpus is unset and no Nova configuration'),
])
def test_bad_configuration_is_refused_naming_the_option(
        guest_artifacts, options, message, agent_process):
    agent = agent_process(**options)
    proc = subprocess.run(agent.command(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == cmd_agent.EXIT_CONFIG
    assert re.search(message, proc.stderr), proc.stderr


def test_garbage_page_means_host_only_and_the_agent_carries_on(
        guest, agent_process):
    uuid = guest.dom.UUIDString()
    agent = agent_process().start()
    try:
        agent.wait(lambda s: (vm_status(s, uuid) or {}).get(
            'signal') == 'guest', what='guest signal')
        path = '/dev/shm/ufo-' + uuid
        stop = threading.Event()

        def scribble():
            # Over the guest's cache lines, as a broken or hostile guest
            # could, faster than the guest rewrites them each second: a
            # /status request waits for the next tick, so the test cannot
            # scribble between requests only.
            rnd = random.Random(7)
            with open(path, 'r+b') as page:
                while not stop.wait(0.02):
                    page.seek(128)
                    page.write(bytes(rnd.getrandbits(8) for _ in range(128)))
                    page.flush()

        scribbler = threading.Thread(target=scribble, daemon=True)
        scribbler.start()
        seen = None
        deadline = time.monotonic() + 30
        try:
            while seen is None and time.monotonic() < deadline:
                vm = vm_status(agent.status(), uuid)
                if vm and vm['signal'] == 'host-only':
                    seen = vm
        finally:
            stop.set()
            scribbler.join()
        assert seen is not None, 'never fell back to host-only'
        assert seen['reason']
        ticks = agent.status()['ticks']
        # The guest rewrites its area every second: guest mode comes back.
        agent.wait(lambda s: vm_status(s, uuid)['signal'] == 'guest'
                   and s['ticks'] > ticks + 2, what='guest signal again')
        assert 'signal: host-only' in agent.log.read_text()
    finally:
        agent.signal(signal.SIGTERM)


def test_idle_guest_is_parked_then_destroyed_leaves_nothing(
        guest, agent_process):
    with nova_guest(vcpus=1, cmdline='') as other:
        uuid = other.dom.UUIDString()
        agent = agent_process(agent__state_save_interval='1',
                              controller__idle_after='3')
        agent.start()
        try:
            agent.wait(lambda s: vm_status(s, uuid) is not None and
                       (agent.state / (uuid + '.json')).exists(),
                       what='the second guest managed')
            assert os.path.exists('/dev/shm/ufo-' + uuid)
            # No workload: parked in the idle pool, on its CPUs, one vCPU.
            status = agent.wait(
                lambda s: vm_status(s, uuid)['mode'] == 'idle', what='parked')
            vm = vm_status(status, uuid)
            assert vm['cores'] == 0
            assert {int(c) for c in vm['cpus'].split(',')} == \
                set(status['pools']['idle_cpus'])
            assert 'action=park' in agent.log.read_text()
            other.dom.destroy()
            agent.wait(lambda s: vm_status(s, uuid) is None,
                       what='the guest dropped')
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and \
                    os.path.exists('/dev/shm/ufo-' + uuid):
                time.sleep(0.2)
            assert not os.path.exists('/dev/shm/ufo-' + uuid)
            assert not (agent.state / (uuid + '.json')).exists()
            # The first guest is still managed.
            assert vm_status(agent.status(),
                             guest.dom.UUIDString()) is not None
        finally:
            agent.signal(signal.SIGTERM)


def test_libvirtd_restart_is_survived(guest, agent_process):
    uuid = guest.dom.UUIDString()
    agent = agent_process().start()
    try:
        agent.wait(lambda s: (vm_status(s, uuid) or {}).get(
            'online_vcpus') == 1, what='managed')
        subprocess.run(['pkill', '-x', 'libvirtd'], check=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and subprocess.run(
                ['pgrep', '-x', 'libvirtd']).returncode == 0:
            time.sleep(0.2)
        testguest.start_libvirtd()
        # The fixture's own connection died with libvirtd.
        import libvirt
        guest.conn = libvirt.open(testguest.LIBVIRT_URI)
        guest.dom = guest.conn.lookupByUUIDString(uuid)
        ticks = agent.status()['ticks']
        # Still ticking, still managing, and it can pin again: a guest
        # whose vCPUs all came back is brought to its target again.
        agent.wait(lambda s: s['ticks'] > ticks + 3 and
                   vm_status(s, uuid) is not None, what='ticks after restart')
        assert guest.online_cpus() == {0}
        assert agent.proc.poll() is None
    finally:
        assert agent.signal(signal.SIGTERM) == 0
    assert wait_guest_online(guest, set(range(VCPUS))) == set(range(VCPUS))


def test_guest_reset_is_applied_again(guest_artifacts, agent_process):
    with nova_guest(on_reboot='restart',
                    cmdline='ufo.rate=300 ufo.svc_us=500') as g:
        uuid = g.dom.UUIDString()
        agent = agent_process().start()
        try:
            agent.wait(lambda s: (vm_status(s, uuid) or {}).get(
                'online_vcpus') == 1, what='one vCPU online')
            mark = g.console.position
            g.dom.reset()
            # The guest boots again with every vCPU; the agent applies its
            # target again (on the reboot event, or on seeing the guest
            # keep more vCPUs online than asked).
            g.console.wait_for(r'UFO-INIT ready', 180, start=mark)
            assert wait_guest_online(g, {0}, timeout=60) == {0}
            # The new boot was asked nothing before its module loaded, so
            # it was never sent to host-only for not answering.
            assert 'no acknowledgement' not in agent.log_text()
        finally:
            agent.signal(signal.SIGTERM)
