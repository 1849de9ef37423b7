"""Pause/resume, soft and hard reboot of managed guests, end to end.

Real QEMU guests and a real ufo-agent, on a libvirtd of their own
(:class:`ufo_tools.nshost.NamespaceHost`): nothing else runs there, so the
agent manages exactly these guests, whatever other tests do on the
machine's own libvirtd. What a guest's threads may run on is read from
libvirt (live pins) and compared with the other guests' at once.
"""

import signal
import time

import pytest

from ufo_tools.e2e import AgentProcess
from ufo_tools.e2e import host_online_cpus
from ufo_tools.e2e import live_pins
from ufo_tools.e2e import nova_guest
from ufo_tools.e2e import vm_status
from ufo_tools import nshost

LOAD = 'ufo.rate=300 ufo.svc_us=500 ufo.workers=2'
# More than one vCPU can serve: it wants every core it can get.
HEAVY = 'ufo.rate=3000 ufo.svc_us=500 ufo.workers=2'


@pytest.fixture(scope='module')
def host(guest_artifacts):
    with nshost.NamespaceHost('ufo-lifecycle', 49500) as h:
        yield h


def _cpus(vm):
    return {int(c) for c in vm['cpus'].split(',') if c}


def _vcpu_cpus(guest):
    vcpus, _ = live_pins(guest)
    return frozenset().union(*vcpus)


def _agent(host, tmp_path, **options):
    return AgentProcess(tmp_path, command_prefix=host.command([]),
                        **options).start()


def test_pause_parks_and_resume_never_runs_on_another_guests_cpus(
        host, tmp_path):
    with nova_guest(name='busy', uri=host.uri, cmdline=HEAVY) as busy, \
            nova_guest(name='paused', uri=host.uri, cmdline=LOAD) as other:
        b, p = busy.dom.UUIDString(), other.dom.UUIDString()
        # Small host: no emulator pool, one idle core once a guest parks.
        agent = _agent(host, tmp_path, controller__emulator_min_cores='0',
                       controller__idle_pool_min_cores='1')
        try:
            agent.wait(lambda s: all(
                (vm_status(s, u) or {}).get('signal') == 'guest' and
                vm_status(s, u)['cores'] >= 1 for u in (b, p)),
                what='both guests on cores of their own')
            overlaps = []

            def check(when):
                status = agent.poll() or {}
                vm = vm_status(status, b) or {}
                mine, theirs = _vcpu_cpus(other), _vcpu_cpus(busy)
                if vm.get('cores') and mine & theirs:
                    overlaps.append((when, sorted(mine), sorted(theirs)))

            other.dom.suspend()
            # The busy guest would take its core: it may only once the
            # paused guest's threads are elsewhere.
            parked = None
            deadline = time.monotonic() + 8
            while time.monotonic() < deadline:
                check('paused')
                status = agent.poll() or {}
                vm = vm_status(status, p) or {}
                if vm.get('paused') and vm['mode'] == 'idle':
                    # Still managed: parked, pinned on the shared CPUs.
                    parked = (vm['cores'], _vcpu_cpus(other) <= set(
                        status['pools']['shared_cpus']))
                time.sleep(0.25)
            other.dom.resume()
            check('right after the resume')
            assert overlaps == []
            assert parked == (0, True)
            log = agent.log.read_text()
            assert 'reason="paused"' in log and 'action=park' in log
            # Running again, it wakes like a parked guest: cores again.
            agent.wait(lambda s: not vm_status(s, p)['paused'] and
                       vm_status(s, p)['mode'] == 'active' and
                       vm_status(s, p)['cores'] >= 1, what='woken up')
            check('woken up')
            assert overlaps == []
        finally:
            assert agent.stop(signal.SIGTERM) == 0


def _converged(status, uuid):
    vm = vm_status(status, uuid) or {}
    return (vm.get('signal') == 'guest' and vm.get('channel') == 'proven'
            and vm.get('target_vcpus') == 1 and vm.get('online_vcpus') == 1)


def test_soft_reboot_keeps_the_pins_and_converges(host, tmp_path):
    with nova_guest(uri=host.uri, on_reboot='restart', cmdline=LOAD) as g:
        uuid = g.dom.UUIDString()
        agent = _agent(host, tmp_path)
        try:
            status = agent.wait(lambda s: _converged(s, uuid),
                                what='one vCPU online')
            emulator = set(status['pools']['emulator_cpus'])
            pins = _vcpu_cpus(g)
            assert pins == _cpus(vm_status(status, uuid))
            mark = g.console.position
            # The guest resets itself: the same QEMU starts over. (What
            # dom.reboot() ends in; this guest ignores its ACPI request.)
            g.console.write('reboot -f\n')
            _, booted = g.console.wait_for(r'UFO-INIT kernel=\S+ cpus=(\d+)',
                                           120, start=mark)
            # Right after: same threads, same pins, off the emulator pool.
            assert _vcpu_cpus(g) == pins and not pins & emulator
            # Its kernel starts with every vCPU online.
            assert booted.group(1) == '2'
            g.console.wait_for(r'UFO-INIT ready', 120, start=mark)
            ticks = agent.poll()['ticks']
            status = agent.wait(lambda s: s['ticks'] > ticks and
                                _converged(s, uuid), what='converged')
            assert _vcpu_cpus(g) == _cpus(vm_status(status, uuid))
            assert 'Guest %s rebooted' % uuid in agent.log.read_text()
        finally:
            assert agent.stop(signal.SIGTERM) == 0


def test_hard_reboot_starts_from_the_definition_and_converges(
        host, tmp_path):
    with nova_guest(uri=host.uri, persistent=True, cmdline=LOAD) as g:
        uuid = g.dom.UUIDString()
        agent = _agent(host, tmp_path)
        try:
            status = agent.wait(lambda s: _converged(s, uuid),
                                what='one vCPU online')
            emulator = set(status['pools']['emulator_cpus'])
            # Nova's hard reboot: destroy, then start from the definition.
            g.dom.destroy()
            g.dom.create()
            started = time.monotonic()
            # A new QEMU runs on its definition's CPUs (every one here)
            # until the agent's next tick narrows it.
            window = None
            while time.monotonic() - started < 10:
                pins = _vcpu_cpus(g)
                if pins and not pins & emulator:
                    window = time.monotonic() - started
                    break
                time.sleep(0.05)
            assert window is not None and window < 3.0, window
            status = agent.wait(lambda s: _converged(s, uuid),
                                timeout=180, what='converged after boot')
            assert _vcpu_cpus(g) == _cpus(vm_status(status, uuid))
            assert _vcpu_cpus(g) <= host_online_cpus()
        finally:
            assert agent.stop(signal.SIGTERM) == 0
