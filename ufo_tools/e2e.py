"""Real guests and a real ufo-agent process, for the demo and e2e tests.

``nova_guest`` boots a test guest (``ufo_tools.testguest``) and
writes Nova's ``<nova:instance>`` metadata into it, as Nova does, so that
ufo-agent manages it like any instance. ``AgentProcess`` runs the real
``ufo-agent`` command with a generated configuration file and reads its
/status endpoint, which is ``{}`` until the agent's first tick: every
reader here treats that as "no data yet", never as a status.
"""

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

from ufo_agent.hypervisor.domain import NOVA_NS
from ufo_agent.service import pidlock
from ufo_tools import testguest

NOVA_META = """<instance>
  <name>%(name)s</name>
  <flavor name="%(flavor)s"><vcpus>%(vcpus)d</vcpus>
    <extraSpecs>%(specs)s</extraSpecs>
  </flavor>
</instance>"""


class AgentFailed(AssertionError):
    """ufo-agent exited, or a condition was not reached in time."""


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def host_online_cpus():
    with open('/sys/devices/system/cpu/online') as handle:
        text = handle.read().strip()
    cpus = set()
    for part in text.split(','):
        first, _, last = part.partition('-')
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


class AgentProcess:
    """``ufo-agent`` as a subprocess; options are ``group__name=value``."""

    def __init__(self, workdir, command_prefix=(), user=None, **options):
        # command_prefix: e.g. NamespaceHost.command([]) to run it there.
        # user: an ufo_tools.agentuser.AgentUser to run it as (workdir
        # becomes that user's).
        self.command_prefix = list(command_prefix)
        if user is not None:
            user.workdir(str(workdir))
            # The host-wide lock's directory, as the packaged unit makes
            # it for the agent's user.
            user.own_directory(pidlock.HOST_LOCK_DIR)
            self.command_prefix = user.command() + self.command_prefix
        self.port = free_port()
        self.state = workdir / 'state'
        self.log = workdir / 'agent.log'
        online = ','.join(str(cpu) for cpu in sorted(host_online_cpus()))
        conf = {
            'agent': {'state_path': str(self.state),
                      'metrics_port': str(self.port)},
            'controller': {'idle_after': '600'},
            # No Nova here: manage every online CPU, said explicitly.
            'host_cpus': {'managed_cpus': online, 'nova_config': '',
                          'nova_config_dir': ''},
            # No broker: the messaging path has its own tests.
            'publishers': {'enabled': ''},
        }
        for key, value in options.items():
            group, name = key.split('__')
            conf.setdefault(group, {})[name] = value
        self.conf = workdir / 'ufo-agent.conf'
        self.conf.write_text(''.join(
            '[%s]\n%s\n' % (group, ''.join('%s = %s\n' % kv
                                           for kv in values.items()))
            for group, values in conf.items()))
        self.proc = None

    def command(self, *extra):
        return self.command_prefix + [
            sys.executable, '-m', 'ufo_agent.cmd.agent', '--config-file',
            str(self.conf), '--log-file', str(self.log)] + list(extra)

    def start(self):
        self.proc = subprocess.Popen(self.command())
        return self

    def restore(self, timeout=60.0):
        """``ufo-agent --restore``, same configuration, same user."""
        return subprocess.run(self.command('--restore'), capture_output=True,
                              text=True, timeout=timeout)

    def log_text(self):
        return self.log.read_text() if self.log.exists() else ''

    def poll(self):
        """One read of /status: the status, or None before the first tick.

        Until its first tick the agent answers ``{}``: no data yet.
        """
        url = 'http://127.0.0.1:%d/status' % self.port
        with urllib.request.urlopen(url, timeout=5) as response:
            return ticked(json.loads(response.read().decode()))

    def status(self, timeout=30.0):
        """The agent's status, waiting past ``{}`` until its first tick."""
        return self.wait(lambda s: True, timeout, 'the first tick')

    def _check_running(self):
        if self.proc.poll() is not None:
            raise AgentFailed('ufo-agent exited with %d:\n%s' % (
                self.proc.returncode, self.log_text()[-3000:]))

    def wait(self, pred, timeout=90.0, what='condition'):
        """The first status (never the empty one) for which ``pred`` holds.

        The endpoint not answering yet counts as no data, like ``{}``.
        """
        deadline = time.monotonic() + timeout
        last = None
        while True:
            self._check_running()
            try:
                status = self.poll()
            except OSError:
                status = None
            if status is not None:
                last = status
                if pred(status):
                    return status
            if time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        full = '\nstatus %s' % (last,) if last else ''
        raise AgentFailed('timeout waiting for %s; last %s%s\n%s'
                          % (what, brief(last), full,
                             self.log_text()[-3000:]))

    def signal(self, signum, timeout=60.0):
        self.proc.send_signal(signum)
        return self.proc.wait(timeout)

    def stop(self, signum, timeout=60.0):
        """Signal the agent and wait; kill it if it does not exit."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        try:
            return self.signal(signum, timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


@contextlib.contextmanager
def nova_guest(vcpus=2, name='e2e-web', flavor='lc.small', vm_class='lc',
               extra_specs=None, **kwargs):
    """A test guest carrying Nova's instance metadata, as Nova writes it.

    ``extra_specs`` adds flavor extra specs beside ``ufo:class``.

    On exit the guest is destroyed and the channel page ufo-agent attached
    is removed (a running agent would remove it itself).
    """
    import libvirt
    g = testguest.TestGuest(vcpus=vcpus, channel=False, **kwargs)
    g.start()
    uuid = g.dom.UUIDString()
    specs = dict(extra_specs or {})
    if vm_class:
        specs['ufo:class'] = vm_class
    specs = ''.join('<extraSpec name="%s">%s</extraSpec>' % item
                    for item in sorted(specs.items()))
    flags = libvirt.VIR_DOMAIN_AFFECT_LIVE
    if g.persistent:
        # Into the definition too, as Nova writes it there.
        flags |= libvirt.VIR_DOMAIN_AFFECT_CONFIG
    try:
        g.dom.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT,
                          NOVA_META % {'name': name, 'flavor': flavor,
                                       'vcpus': vcpus, 'specs': specs},
                          'nova', NOVA_NS, flags)
        yield g
    finally:
        g.close()
        try:
            os.unlink('/dev/shm/ufo-' + uuid)
        except FileNotFoundError:
            pass


def set_load(guest, rate, svc_us=500, workers=2, report=False,
             publish=0):
    """(Re)start the guest's LC workload at ``rate`` requests/s; 0 stops it.

    With ``report`` the workload prints its latency line (``UFO-WL``)
    every second on the serial console; with ``publish`` it writes its
    p``publish`` latency to the guest module every second.
    """
    guest.console.sh('killall ufo-workload 2>/dev/null; true')
    if rate:
        out = '/dev/ttyS0' if report else '/dev/null'
        rc, _ = guest.console.sh(
            '(ufo-workload rate=%d svc_us=%d workers=%d publish=%g '
            '>%s 2>&1 &)' % (rate, svc_us, workers, publish, out))
        if rc != 0:
            raise RuntimeError('could not start the workload in %s'
                               % guest.name)


def stable(pred, seconds):
    """A status predicate that holds once ``pred`` held for ``seconds``."""
    since = []

    def check(status):
        if not pred(status):
            since.clear()
            return False
        if not since:
            since.append(time.monotonic())
        return time.monotonic() - since[0] >= seconds
    return check


def brief(status):
    """The pools and guests of a status on one line, for failure messages.

    CI summaries keep only a failure's first line; the configuration,
    which comes first in a full status, says nothing about what went wrong.
    A guest reads: mode, cores held/wanted, vCPUs online/target,
    utilization, signal/acknowledgement state and the controller's note.
    """
    if not status:
        return 'status: none (no tick yet)'
    pools = status.get('pools') or {}
    guests = ['%s %s cores=%s/%s vcpus=%s/%s util=%.1f %s/%s%s' % (
        vm.get('name') or vm.get('uuid'), vm.get('mode'), vm.get('cores'),
        vm.get('wanted_cores'), vm.get('online_vcpus'),
        vm.get('target_vcpus'), vm.get('util') or 0.0, vm.get('signal'),
        vm.get('channel') or '-',
        ' "%s"' % vm['note'] if vm.get('note') else '')
        for vm in status.get('vms') or ()]
    counts = {key: value for key, value in sorted(pools.items())
              if not key.endswith('_cpus')}
    return 'pools %s; vms [%s]' % (counts, ', '.join(guests))


def why_exited(rc, output):
    """One line on why a tool's process failed, for failure messages.

    The exception of the last traceback in ``output`` if there is one,
    else its last line; CI summaries keep only a failure's first line.
    """
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines)
              if line.startswith('Traceback (most recent call last)')]
    reason = None
    if starts:
        reason = next((line for line in lines[starts[-1] + 1:]
                       if line and not line[0].isspace()), None)
    if reason is None:
        reason = next((line for line in reversed(lines) if line.strip()),
                      'no output')
    return 'exited with %s: %s' % (rc, reason)


def ticked(status):
    """``status`` if the agent has ticked; None for ``{}`` (no data yet)."""
    return status or None


def vm_status(status, uuid):
    """The guest ``uuid`` in an agent status; None if absent or no data."""
    for vm in (status or {}).get('vms') or ():
        if vm.get('uuid') == uuid:
            return vm
    return None


def live_pins(guest):
    """libvirt's live pins: (set of vCPU pin sets, emulator pin set)."""
    vcpus = {frozenset(i for i, on in enumerate(m) if on)
             for m in guest.dom.vcpuPinInfo(1)}
    emulator = frozenset(i for i, on in enumerate(
        guest.dom.emulatorPinInfo(1)) if on)
    return vcpus, emulator


def wait_guest_online(guest, want, timeout=60.0):
    """Wait until the guest's online CPUs are ``want``; return what it has."""
    deadline = time.monotonic() + timeout
    while True:
        online = guest.online_cpus()
        if online == want or time.monotonic() > deadline:
            return online
        time.sleep(0.5)
