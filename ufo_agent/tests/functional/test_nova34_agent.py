"""ufo-agent over the guests Nova 34 itself defines, on the real libvirtd.

Nova's own domain XML (``ufo_agent/tests/fixtures/nova34``) for flavors
with ``hw:cpu_policy`` shared (plain, opted out with ``ufo:managed=false``,
``hw:numa_nodes=1``, ``hw:mem_page_size``), dedicated (also with
``hw:emulator_threads_policy=isolate``) and mixed, plus a second copy of
the shared one whose image has no ufo_guest module. Only what the test
host needs is adapted (:func:`ufo_agent.tests.nova_fixtures.adapt`: TCG,
CPU and node numbers, memory, and a direct kernel boot of the test guest
instead of the missing disk). All are defined and started at once.

The fake host's shared CPUs become the test host's highest CPU, its
dedicated and reserved CPUs the lowest (CPU 0), and ``nova.conf`` says so
(``[compute] cpu_shared_set``, ``cpu_dedicated_set``): ufo-agent's safe
default manages exactly the shared CPU. It runs in the small-host mode
over all the guests at once, and the tests check, from libvirt and from
inside the guests:

* which guests it manages: the shared ones, the one without the module in
  host-only mode; not the opted-out, dedicated or mixed ones;
* that it never changes a pin of a guest it does not manage, and never
  pins anything of any guest to CPU 0 (dedicated and reserved);
* that SIGTERM, and ``ufo-agent --restore`` after a SIGKILL, give every
  guest back exactly its definition: every vCPU, the emulator and each
  I/O thread where :func:`~ufo_agent.hypervisor.domain.restore_pins` of
  its persistent definition says, and every vCPU online in the guest.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid as uuidlib

import pytest

from ufo_agent.hypervisor import domain as dom
from ufo_agent.tests import nova_fixtures
from ufo_tools.e2e import AgentProcess
from ufo_tools.e2e import host_online_cpus
from ufo_tools.e2e import vm_status
from ufo_tools.e2e import wait_guest_online
from ufo_tools import testguest

FAKE = nova_fixtures.Host()
# The test guest's Debian cloud kernel boots in 96 MiB, not in 64 (it
# stops before its first console line).
MEMORY_MIB = 128
# Long: a guest never brings its vCPUs back by itself here; the agent's
# stop or --restore must.
WATCHDOG_MS = 60000
SMALL_HOST = {'controller__emulator_min_cores': '0',
              'controller__idle_pool_min_cores': '0'}
LIVE = 1            # VIR_DOMAIN_AFFECT_LIVE
INACTIVE = 2        # VIR_DOMAIN_XML_INACTIVE

#: Test guest name -> (fixture, the image has the module).
GUESTS = {
    'shared': ('shared', True),
    'shared-optout': ('shared-optout', True),
    'shared-numa': ('shared-numa', True),
    'shared-pagesize': ('shared-pagesize', True),
    'dedicated': ('dedicated', True),
    'dedicated-isolate': ('dedicated-isolate', True),
    'mixed': ('mixed', True),
    'shared-nomodule': ('shared', False),
}
MANAGED = {'shared', 'shared-numa', 'shared-pagesize', 'shared-nomodule'}


def _cpus(bits):
    return frozenset(cpu for cpu, on in enumerate(bits) if on)


class NovaGuest:
    """One adapted fixture, defined and running, with its serial console."""

    def __init__(self, name, domain, module):
        self.name = name
        self.dom = domain
        self.module = module
        self.uuid = domain.UUIDString()
        self.console = None
        self.log_path = None
        self.boot = None

    def start(self, log_dir, timeout=300.0):
        """Start booting; :meth:`wait_ready` waits for the shell."""
        self.log_path = os.path.join(log_dir, self.name + '.log')
        self.boot = testguest.GuestBoot(
            'nova34-' + self.name, self._start, self._stop, timeout,
            diagnose=lambda: testguest.diagnose(self.dom)).begin()

    def _start(self):
        self.dom.create()
        self.console = testguest.serial_console(self.dom, self.log_path)
        return self.console

    def _stop(self):
        testguest.stop_domain(self.dom, self.console)

    def wait_ready(self):
        self.boot.wait()

    def online_cpus(self):
        return testguest.online_cpus(self.console)

    def pins(self):
        """Live pins of every vCPU, the emulator and each I/O thread."""
        return dom.RestorePins(
            {i: _cpus(m) for i, m in enumerate(self.dom.vcpuPinInfo(LIVE))},
            _cpus(self.dom.emulatorPinInfo(LIVE)),
            {i: _cpus(m) for i, m in self.dom.ioThreadInfo(LIVE)})

    def definition_pins(self, online):
        definition = dom.parse_domain(self.dom.XMLDesc(INACTIVE))
        return dom.restore_pins(definition, online)

    @property
    def vcpus(self):
        return len(self.dom.vcpuPinInfo(LIVE))


@pytest.fixture(scope='module')
def host():
    online = frozenset(host_online_cpus())
    assert len(online) >= 2, 'the test host needs 2 online CPUs'
    shared, other = max(online), min(online)
    cpu_map = {cpu: shared if cpu in FAKE.shared else other
               for cpu in FAKE.online}
    return online, frozenset([shared]), frozenset([other]), cpu_map


@pytest.fixture(scope='module')
def nova_conf(host, tmp_path_factory):
    _, shared, other, _ = host
    path = tmp_path_factory.mktemp('nova') / 'nova.conf'
    path.write_text('[compute]\ncpu_shared_set = %s\ncpu_dedicated_set = %s\n'
                    % (','.join(map(str, shared)), ','.join(map(str, other))))
    return path


@pytest.fixture(scope='module')
def guests(host, guest_artifacts):
    import libvirt
    online, shared, other, cpu_map = host
    work = tempfile.mkdtemp(prefix='ufo-nova34-')
    os.chmod(work, 0o755)
    kernel = os.path.join(work, 'vmlinuz')
    initrd = os.path.join(work, 'initrd.gz')
    shutil.copy(guest_artifacts['KERNEL'], kernel)
    shutil.copy(guest_artifacts['INITRD'], initrd)
    for path in (kernel, initrd):
        os.chmod(path, 0o644)
    conn = libvirt.open(testguest.LIBVIRT_URI)
    booted = {}
    try:
        for name, (fixture, module) in GUESTS.items():
            cmdline = ' '.join(
                testguest.BASE_CMDLINE +
                ['ufo_guest.watchdog_ms=%d' % WATCHDOG_MS])
            if not module:
                cmdline += ' ufo.noload=1'
            xml = nova_fixtures.adapt(
                nova_fixtures.xml(fixture), cpu_map,
                uuid=str(uuidlib.uuid4()),
                name=testguest.NAME_PREFIX + 'nova34-agent-' + name,
                memory_mib=MEMORY_MIB, kernel=kernel, initrd=initrd,
                cmdline=cmdline)
            booted[name] = NovaGuest(name, conn.defineXML(xml), module)
        for g in booted.values():
            g.start(work)
        # One that stalls boots again alone; the others go on.
        for g in booted.values():
            g.wait_ready()
        yield booted
    finally:
        for g in booted.values():
            if g.console is not None:
                g.console.close()
            try:
                g.dom.destroy()
            except libvirt.libvirtError:
                pass
            g.dom.undefine()
            try:
                os.unlink('/dev/shm/ufo-' + g.uuid)
            except FileNotFoundError:
                pass
        conn.close()
        os.makedirs(testguest.LOG_DIR, exist_ok=True)
        for name in os.listdir(work):
            if name.endswith('.log'):
                shutil.copy(os.path.join(work, name), os.path.join(
                    testguest.LOG_DIR, 'nova34-agent-' + name))
        shutil.rmtree(work, ignore_errors=True)


def agent_for(tmp_path, nova_conf, **options):
    return AgentProcess(tmp_path, host_cpus__nova_config=str(nova_conf),
                        host_cpus__nova_config_dir='',
                        **dict(SMALL_HOST, **options))


class Watch:
    """Samples every guest's live pins while the agent runs."""

    def __init__(self, guests, dedicated):
        self.guests = guests
        self.dedicated = dedicated
        self.before = {name: g.pins() for name, g in guests.items()}
        self.samples = 0

    def sample(self):
        for name, g in self.guests.items():
            pins = g.pins()
            if name not in MANAGED:
                assert pins == self.before[name], (name, pins)
                continue
            for cpus in [pins.emulator] + list(pins.vcpus.values()) + \
                    list(pins.iothreads.values()):
                assert not cpus & self.dedicated, (name, pins)
        self.samples += 1


def wait_managed(agent, guests, watch, timeout=240.0):
    """Until the managed guests are at their targets; returns the status."""
    uuids = {g.uuid: name for name, g in guests.items()}

    def ready(status):
        watch.sample()
        managed = {uuids.get(vm['uuid'], vm['uuid'])
                   for vm in status.get('vms') or ()}
        assert managed <= MANAGED, managed
        if managed != MANAGED:
            return False
        for name in MANAGED:
            vm = vm_status(status, guests[name].uuid)
            if guests[name].module:
                # One managed core: every guest keeps one vCPU online.
                if vm['signal'] != 'guest' or vm['target_vcpus'] != 1 or \
                        vm['online_vcpus'] != 1:
                    return False
            elif vm['signal'] != 'host-only':
                return False
        return True

    return agent.wait(ready, timeout=timeout, what='every shared guest '
                      'managed and at its target')


def assert_given_back(guests, online):
    """Every guest exactly as its persistent definition says, all online."""
    for name, g in guests.items():
        assert g.pins() == g.definition_pins(online), name
    for name, g in guests.items():
        want = set(range(g.vcpus))
        assert wait_guest_online(g, want) == want, name


def test_agent_manages_only_shared_guests_and_sigterm_restores_all(
        host, nova_conf, guests, tmp_path):
    online, shared, dedicated, _ = host
    assert_given_back(guests, online)
    watch = Watch(guests, dedicated)
    # No managed_cpus: the safe default, Nova's cpu_shared_set.
    agent = agent_for(tmp_path, nova_conf,
                      host_cpus__managed_cpus='').start()
    try:
        wait_managed(agent, guests, watch)
        for _ in range(6):
            time.sleep(0.5)
            watch.sample()
        for name, g in guests.items():
            if name in MANAGED and g.module:
                assert g.online_cpus() == {0}, name
        assert guests['shared-nomodule'].online_cpus() == {0, 1}
        assert agent.signal(signal.SIGTERM) == 0
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()
            agent.proc.wait()
    log = agent.log_text()
    assert 'manages 1 cores (1 CPUs)' in log, log
    for name, g in guests.items():
        skipped = 'Not managing domain %s' % g.uuid in log
        assert skipped == (name not in MANAGED), name
    assert 'Released %d guests (0 failed)' % len(MANAGED) in log
    assert watch.samples >= 8
    assert_given_back(guests, online)


def test_restore_after_sigkill_gives_every_guest_back_exactly(
        host, nova_conf, guests, tmp_path):
    online, shared, dedicated, _ = host
    assert_given_back(guests, online)
    watch = Watch(guests, dedicated)
    # managed_cpus said explicitly; Nova's configuration still checks it.
    agent = agent_for(tmp_path, nova_conf, host_cpus__managed_cpus=','.join(
        map(str, shared))).start()
    try:
        wait_managed(agent, guests, watch)
        watch.sample()
    finally:
        agent.proc.kill()
        agent.proc.wait()
    # Left as the agent had them: one vCPU online in each module guest.
    for name, g in guests.items():
        if name in MANAGED and g.module:
            assert g.online_cpus() == {0}, name
    proc = subprocess.run(
        [sys.executable, '-m', 'ufo_agent.cmd.agent', '--config-file',
         str(agent.conf), '--restore', '--log-file',
         str(tmp_path / 'restore.log')],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    log = (tmp_path / 'restore.log').read_text()
    assert log.count('Restored guest') == len(MANAGED), log
    watch.sample()
    assert_given_back(guests, online)
