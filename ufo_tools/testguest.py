"""Test guests under real libvirt and QEMU, for tests, benchmarks and demos.

``build_artifacts()`` runs ``tools/build-test-guest.sh`` (cached by content
hash) and returns the kernel, initramfs and module paths. The script and
the ``guest_image/`` sources it builds come from ``$UFO_SOURCE_DIR``, else
the source checkout this module is in, else the installed data files
(``<prefix>/share/ufo-nova``); see ``source_dir()``. ``TestGuest``
defines and starts a transient domain with direct kernel boot, one UFO
channel (an ivshmem-plain ``<shmem>`` whose page the host initializes
before the guest starts), optionally a virtio NIC on a tap of its own,
and a serial console on a pty that it reads in the background and on
which it can run shell commands. ``GuestBoot`` waits for a guest's init
shell, and starts a boot that stalls again, once.

KVM is used where a guest really boots under it (tried once per process);
elsewhere TCG (``<domain type='qemu'>``). ``UFO_GUEST_ACCEL=kvm|tcg``
forces the choice.
"""

import importlib.metadata
import logging
import os
import re
import select
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import tty
import uuid
from xml.sax import saxutils

from ufo_agent.channel import host_channel
from ufo_agent.driver.libvirt import config as libvirt_config

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARE = os.path.join('share', 'ufo-nova')
BUILD_SCRIPT = os.path.join('tools', 'build-test-guest.sh')
LIBVIRT_URI = 'qemu:///system'
SHM_DIR = '/dev/shm'
SHM_SIZE_MIB = 1
NAME_PREFIX = 'ufo-test-'
TAP_PREFIX = 'ufotap'
# libvirt's QEMU user and group on the Debian/Ubuntu hosts the tests run on.
QEMU_USER = host_channel.DEFAULT_QEMU_USER
QEMU_GROUP = host_channel.DEFAULT_QEMU_GROUP
LOG_DIR = os.environ.get(
    'UFO_GUEST_LOG_DIR',
    os.path.join(tempfile.gettempdir(), 'ufo-guest-logs'))

LOG = logging.getLogger(__name__)

_artifacts = None
_accel = None


class SourcesNotFound(RuntimeError):
    """The test guest's build script and sources are nowhere to be found."""


def _has_sources(path):
    return (os.path.isfile(os.path.join(path, BUILD_SCRIPT)) and
            os.path.isdir(os.path.join(path, 'guest_image')))


def _installed_data_dirs():
    """Where ``[files] data_files`` of setup.cfg may have gone."""
    dirs = []
    try:
        dist = importlib.metadata.distribution('ufo-nova')
        for name in dist.files or ():
            if str(name).replace(os.sep, '/').endswith(
                    'share/ufo-nova/tools/build-test-guest.sh'):
                script = os.path.abspath(str(dist.locate_file(name)))
                dirs.append(os.path.dirname(os.path.dirname(script)))
    except importlib.metadata.PackageNotFoundError:
        pass
    prefixes = [sysconfig.get_path('data'), sys.prefix]
    try:
        prefixes.append(sysconfig.get_path(
            'data', sysconfig.get_preferred_scheme('user')))
    except KeyError:
        pass
    dirs += [os.path.join(prefix, SHARE) for prefix in prefixes]
    return list(dict.fromkeys(dirs))


def source_dir():
    """Where ``tools/build-test-guest.sh`` and ``guest_image/`` are.

    ``$UFO_SOURCE_DIR``, else the source checkout this module is in, else
    ufo-nova's installed data files.
    """
    explicit = os.environ.get('UFO_SOURCE_DIR')
    if explicit:
        if _has_sources(explicit):
            return explicit
        raise SourcesNotFound(
            'UFO_SOURCE_DIR=%s has no %s and guest_image/: point it at a '
            'ufo-nova source checkout' % (explicit, BUILD_SCRIPT))
    searched = [CHECKOUT] + _installed_data_dirs()
    for path in searched:
        if _has_sources(path):
            return path
    raise SourcesNotFound(
        'the test guest needs %s and guest_image/ from ufo-nova; looked in '
        'the source checkout and the installed data files: %s. Set '
        'UFO_SOURCE_DIR to a ufo-nova source checkout.'
        % (BUILD_SCRIPT, ', '.join(searched)))


def _script(name):
    """The command running a script of ``tools/`` (even if not executable)."""
    path = os.path.join(source_dir(), 'tools', name)
    return [path] if os.access(path, os.X_OK) else ['bash', path]


def build_artifacts():
    """Build (or find in the cache) the test guest; returns a dict."""
    global _artifacts
    if _artifacts is None:
        out = subprocess.run(_script('build-test-guest.sh'), check=True,
                             text=True, stdout=subprocess.PIPE).stdout
        _artifacts = dict(line.split('=', 1) for line in out.splitlines()
                          if '=' in line)
    return _artifacts


def _kvm_boots(art, timeout=15.0):
    """Whether a test guest reaches its init under KVM here."""
    if not os.access('/dev/kvm', os.R_OK | os.W_OK):
        return False
    cmd = ['qemu-system-x86_64', '-accel', 'kvm', '-m', '256', '-smp', '1',
           '-nographic', '-no-reboot', '-kernel', art['KERNEL'],
           '-initrd', art['INITRD'], '-append',
           'console=ttyS0 quiet panic=-1 ufo.noload=1 ufo.poweroff=1']
    try:
        out = subprocess.run(cmd, timeout=timeout, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL).stdout
    except (subprocess.TimeoutExpired, OSError):
        return False
    return b'UFO-INIT ready' in out


def accel():
    """'kvm' where KVM really works, else 'tcg'."""
    global _accel
    if _accel is None:
        forced = os.environ.get('UFO_GUEST_ACCEL')
        if forced in ('kvm', 'tcg'):
            _accel = forced
        else:
            _accel = 'kvm' if _kvm_boots(build_artifacts()) else 'tcg'
    return _accel


def _give_to_qemu(path):
    host_channel.hand_to_qemu(path, QEMU_USER, QEMU_GROUP)


def start_libvirtd():
    subprocess.run(_script('start-libvirtd.sh'), check=True)


class Console(object):
    """Reads a guest serial pty in the background; runs shell commands."""

    def __init__(self, path, log_path=None):
        self._fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
        tty.setraw(self._fd)
        self._buf = []
        self._partial = ''
        self._cond = threading.Condition()
        self._closed = False
        self._marks = 0
        self._log = open(log_path, 'a') if log_path else None
        # Called on a command's timeout: what else to say about the guest.
        self.diagnose = None
        self._thread = threading.Thread(target=self._reader, daemon=True)
        self._thread.start()

    def _reader(self):
        while not self._closed:
            try:
                r, _, _ = select.select([self._fd], [], [], 0.2)
                if not r:
                    continue
                data = os.read(self._fd, 65536)
            except OSError:
                time.sleep(0.1)
                continue
            if not data:
                time.sleep(0.05)
                continue
            text = data.decode('latin-1').replace('\r', '')
            now = time.monotonic()
            with self._cond:
                parts = (self._partial + text).split('\n')
                self._partial = parts.pop()
                for line in parts:
                    self._buf.append((now, line))
                    if self._log:
                        self._log.write(line + '\n')
                if self._log:
                    self._log.flush()
                self._cond.notify_all()

    @property
    def position(self):
        with self._cond:
            return len(self._buf)

    def lines(self, start=0):
        with self._cond:
            return [line for _, line in self._buf[start:]]

    def timed_lines(self, start=0):
        with self._cond:
            return list(self._buf[start:])

    def wait_for(self, pattern, timeout=60.0, start=0):
        """Wait for a line matching ``pattern``; returns (index, match)."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        pos = start
        with self._cond:
            while True:
                while pos < len(self._buf):
                    m = rx.search(self._buf[pos][1])
                    if m:
                        return pos, m
                    pos += 1
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError('no %r on the console in %.0fs; '
                                       'last lines:\n%s' % (
                                           pattern, timeout, '\n'.join(
                                               line for _, line in
                                               self._buf[-30:])))
                self._cond.wait(min(left, 0.5))

    def write(self, text):
        os.write(self._fd, text.encode())

    def run(self, command, timeout=60.0):
        """Run a shell command in the guest; returns (rc, output lines).

        Output lines are those prefixed by the command's own marker, so
        console noise (workload reports, kernel messages) stays out.
        """
        self._marks += 1
        tag = 'UFO-R%d' % self._marks
        start = self.position
        self.write("( %s ) 2>&1 | sed 's/^/%s: /'; echo %s-rc=$?\n"
                   % (command, tag, tag))
        # The pipeline's status is sed's; ask for the command's own too.
        try:
            _, m = self.wait_for(r'%s-rc=(\d+)' % tag, timeout, start)
        except TimeoutError as exc:
            # The command first: CI summaries keep a failure's first line.
            raise TimeoutError('%s: no answer on the guest console in %.0f '
                               's\n%s%s' % (
                                   command, timeout, exc,
                                   '\n' + self.diagnose() if self.diagnose
                                   else '')) from exc
        out = [line.split(': ', 1)[1] for line in self.lines(start)
               if line.startswith(tag + ': ')]
        return int(m.group(1)), out

    def sh(self, command, timeout=60.0):
        """Run a command; returns (rc of the command, output lines)."""
        rc, out = self.run('%s; echo "ufo-rc=$?"' % command, timeout)
        code = None
        for line in out:
            if line.startswith('ufo-rc='):
                code = int(line[7:])
        return code, [line for line in out if not line.startswith('ufo-rc=')]

    def close(self):
        if self._closed:
            return      # its fd number may be another file's by now
        self._closed = True
        self._thread.join(2)
        try:
            os.close(self._fd)
        except OSError:
            pass
        if self._log:
            self._log.close()


def serial_console(dom, log_path=None):
    """The serial console of a running domain (its pty in the live XML)."""
    live = dom.XMLDesc(0)
    m = re.search(r"<serial type='pty'>\s*<source path='([^']+)'", live)
    if not m:
        raise RuntimeError('no serial pty in the live XML')
    return Console(m.group(1), log_path)


#: Lines of libvirt's QEMU log of a domain kept in :func:`diagnose`.
QEMU_LOG_LINES = 5


def diagnose(dom):
    """What QEMU and the host say about a domain that went silent."""
    import libvirt
    import libvirt_qemu
    lines = []
    try:
        lines.append('domain state %r' % (dom.state(),))
        for command in ('info cpus', 'info status'):
            out = libvirt_qemu.qemuMonitorCommand(
                dom, command,
                libvirt_qemu.VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP)
            lines.append('%s:\n%s' % (command, out))
    except libvirt.libvirtError as exc:
        lines.append('QEMU monitor: %s' % exc)
    try:
        with open('/run/libvirt/qemu/%s.pid' % dom.name()) as f:
            pid = int(f.read())
        for tid in sorted(os.listdir('/proc/%d/task' % pid), key=int):
            with open('/proc/%d/task/%s/stat' % (pid, tid)) as f:
                stat = f.read()
            comm = stat[stat.index('(') + 1:stat.rindex(')')]
            fields = stat[stat.rindex(')') + 2:].split()
            lines.append('QEMU thread %s %s: state %s utime %s stime %s'
                         % (tid, comm, fields[0], fields[11], fields[12]))
    except (OSError, ValueError) as exc:
        lines.append('QEMU threads: %s' % exc)
    try:
        with open('/proc/loadavg') as f:
            lines.append('host loadavg %s' % f.read().strip())
    except OSError:
        pass
    # Why QEMU exited, if it did: libvirt's log of the domain says.
    try:
        with open('/var/log/libvirt/qemu/%s.log' % dom.name()) as f:
            tail = f.readlines()[-QEMU_LOG_LINES:]
        lines.append('QEMU log tail:\n' + ''.join(tail).rstrip())
    except (OSError, libvirt.libvirtError) as exc:
        lines.append('QEMU log: %s' % exc)
    return '\n'.join(lines)


def stop_domain(dom, console):
    """Close a boot's console and destroy its domain, if still there."""
    import libvirt
    console.close()
    try:
        dom.destroy()
    except libvirt.libvirtError:
        pass    # gone already: a panic reboots, on_reboot destroys


#: How long the first command after boot may go unanswered before it is
#: sent again.
PROBE_TIMEOUT = 20.0


def wait_init(console, timeout, probe_timeout=PROBE_TIMEOUT):
    """Wait for the test guest's /init shell to answer on its console."""
    # The console may have been opened after the first lines: poke it.
    deadline = time.monotonic() + timeout
    while True:
        try:
            console.wait_for(r'UFO-INIT ready|UFO-ALIVE', 5.0)
            break
        except TimeoutError:
            if time.monotonic() > deadline:
                raise
            console.write('echo UFO-ALIVE\n')
    # Input typed while the shell is still setting up its tty can arrive
    # cut, its first characters lost, and a cut command never answers: a
    # probe without an answer is sent again, after a line that ends any
    # subshell the shell was left reading.
    while True:
        left = deadline - time.monotonic()
        try:
            console.run('true', timeout=max(1.0, min(probe_timeout, left)))
            return
        except TimeoutError:
            if time.monotonic() >= deadline:
                raise
            console.write(')\n')


#: A console line saying the test guest's init shell is up.
BOOTED = re.compile(r'UFO-INIT ready|UFO-ALIVE')

#: Kernel lines of a guest its emulator starved: an RCU stall, a timer
#: that never fired, a hung or locked-up task.
BOOT_STALL = re.compile(r"rcu_\S+ .*stall|didn't happen for \d+ jiffies|"
                        r"blocked for more than \d+ seconds|soft lockup")

#: Past its boot deadline, a boot that printed nothing for this long has
#: stalled; one still printing kernel lines is slow, not stalled.
BOOT_QUIET = 20.0

#: Console lines of a failed boot kept in its report.
BOOT_TAIL_LINES = 30

READY = 'ready'
STALLED = 'stalled'
#: Why a boot ended whose console no longer takes input.
CONSOLE_GONE = 'console closed, QEMU gone'
BOOTING = 'booting'


def boot_state(lines, started, now, deadline, quiet=BOOT_QUIET):
    """Where a boot stands by its console: (state, when, why).

    ``lines`` are the boot's (monotonic time, text) console lines. READY
    once its init shell says so; STALLED since its first kernel stall
    line, or since ``deadline`` s after ``started`` with no line for
    ``quiet`` s by then; else BOOTING.
    """
    stall = None
    last = started
    for at, text in lines:
        if BOOTED.search(text):
            return READY, at, text
        if stall is None and BOOT_STALL.search(text):
            stall = at, 'kernel stall: %s' % text.strip()
        last = max(last, at)
    if stall is not None:
        return (STALLED,) + stall
    silent = max(started + deadline, last + quiet)
    if now >= silent:
        return STALLED, silent, 'no UFO-INIT line in %.0f s' % (
            silent - started)
    return BOOTING, None, None


class GuestBoot(object):
    """Boots a test guest until its init shell answers; again if stalled.

    ``start()`` starts the domain and returns its Console; ``stop()``
    destroys it. A boot that stalls (see :func:`boot_state`) within its
    boot deadline, ``timeout / (retries + 1)`` s, is stopped and started
    again, at most ``retries`` times (default
    ``$UFO_GUEST_BOOT_RETRIES``, else 1); all within ``timeout``. TCG on
    a busy host sometimes starves a boot for good. A boot whose console
    stops taking input (its QEMU is gone) is started again at any time,
    within the same ``retries``. The stalled boot's console tail and
    ``diagnose()`` go to the log; a guest still not up at ``timeout``, or
    gone once too often, fails with every boot's.
    """

    def __init__(self, name, start, stop, timeout, retries=None,
                 diagnose=None, quiet=BOOT_QUIET,
                 probe_timeout=PROBE_TIMEOUT, poke_every=5.0):
        if retries is None:
            retries = int(os.environ.get('UFO_GUEST_BOOT_RETRIES', '1'))
        self.name = name
        self._start = start
        self._stop = stop
        self.timeout = timeout
        self.retries = retries
        self.deadline = timeout / (retries + 1)
        self.diagnose = diagnose
        self.quiet = quiet
        self.probe_timeout = probe_timeout
        self.poke_every = poke_every
        self.console = None
        self.boots = 0
        self._began = None
        self._started = None
        self._ready_at = None

    def begin(self):
        """Start the first boot; returns self (guests may boot at once)."""
        self._began = time.monotonic()
        self._boot()
        return self

    def _boot(self):
        self.boots += 1
        self._started = time.monotonic()
        self.console = self._start()

    def wait(self):
        """Until the guest's init shell answers; returns its console."""
        end = self._began + self.timeout
        reports = []
        while True:
            why = self._wait_booted(end, len(reports) < self.retries)
            if why is None:
                break
            reports.append(self._report(why))
            gone = why.startswith(CONSOLE_GONE)
            if gone and len(reports) > self.retries:
                raise TimeoutError(
                    'test guest %s did not boot: %s (boots: %d)\n%s' % (
                        self.name, why, self.boots, '\n'.join(reports)))
            if time.monotonic() >= end:
                raise TimeoutError(
                    'test guest %s did not boot in %.0f s (boots: %d)\n%s' % (
                        self.name, self.timeout, self.boots,
                        '\n'.join(reports)))
            self._stop()
            self._boot()
        LOG.info('%s booted in %.1f s (boot %d, %.1f s in all)', self.name,
                 self._ready_at - self._started, self.boots,
                 self._ready_at - self._began)
        wait_init(self.console, max(1.0, end - time.monotonic()),
                  self.probe_timeout)
        return self.console

    def _wait_booted(self, end, may_restart):
        """None once booted; else why it stalled, or why it is late."""
        poked = time.monotonic()
        while True:
            now = time.monotonic()
            state, when, why = boot_state(
                self.console.timed_lines(), self._started, now,
                self.deadline, self.quiet)
            if state == READY:
                self._ready_at = when
                return None
            if state == STALLED and may_restart and \
                    when - self._started <= self.deadline:
                return why
            if now >= end:
                return why or 'no UFO-INIT ready'
            # The console may have been opened after the first lines.
            if now - poked >= self.poke_every:
                try:
                    self.console.write('echo UFO-ALIVE\n')
                except OSError as exc:
                    # EIO: QEMU closed its end of the pty, it is gone.
                    return '%s (%s)' % (CONSOLE_GONE, exc.strerror)
                poked = now
            try:
                self.console.wait_for('', min(1.0, end - now),
                                      start=self.console.position)
            except TimeoutError:
                pass

    def _report(self, why):
        report = 'boot %d of %s after %.0f s: %s; console tail:\n%s' % (
            self.boots, self.name, time.monotonic() - self._started, why,
            '\n'.join(self.console.lines()[-BOOT_TAIL_LINES:]))
        if self.diagnose:
            report += '\n' + self.diagnose()
        LOG.warning('%s', report)
        return report


def online_cpus(console):
    """CPUs online as the guest's sysfs says, parsed from '0-2,3'."""
    _, out = console.run('cat /sys/devices/system/cpu/online')
    cpus = set()
    for part in ''.join(out).strip().split(','):
        first, _, last = part.partition('-')
        if first:
            cpus.update(range(int(first), int(last or first) + 1))
    return cpus


# Multi-threaded TCG can leave vCPUs spinning at kernel text that another
# vCPU patches with text_poke_bp; the next IPI then waits on them for good
# (a soft lockup in insmod or rmmod: 2 of about 350 boot-time loads, and
# one of the first twenty reloads under load). The module's sched_switch
# probe patches __schedule when it is the first probe or the last to go.
# The event, enabled on the command line, patches it before the other CPUs
# start, and holds it; /init stops the recording (the probe stays).
TCG_TEXT_PATCH_ONCE = ['trace_event=sched:sched_switch', 'trace_buf_size=1k']

# The boot-time crypto self-tests run in threads on every vCPU; under
# multi-threaded TCG both once spun for minutes (soft lockups in
# cryptomgr_test) and the guest never reached /init. The tests check
# the kernel's crypto, which no test here uses.
NO_CRYPTO_SELFTESTS = ['cryptomgr.notests=1']

# Every test guest's kernel command line starts with these.
BASE_CMDLINE = (['console=ttyS0', 'loglevel=4', 'panic=-1'] +
                TCG_TEXT_PATCH_ONCE + NO_CRYPTO_SELFTESTS)


class TestGuest(object):
    """One transient test domain with a UFO channel and a serial console.

    Use as a context manager; ``close()`` destroys the domain and removes
    the shm files and copies it made, also after failures.

    ``nic=True`` adds a virtio NIC as Nova writes it for several os-vif
    plugins (``<interface type='ethernet'>``) and has /init load its
    driver. Its target is managed: libvirt creates the tap ``self.tap``,
    up, and it goes with the domain's QEMU. The guest's eth0 (MAC
    ``self.mac``) is left down.
    """

    def __init__(self, vcpus=4, memory_mib=256, cmdline='', channel=True,
                 workdir=None, watchdog_ms=None, poll_ms=None, kernel=None,
                 initrd=None, disk=None, test_init=True,
                 on_reboot='destroy', uri=None, persistent=False,
                 cpuset=None, metadata='', nic=False):
        import libvirt  # only the functional tests and benches need it

        self.libvirt = libvirt
        # Another kernel/initrd/disk boots a real image instead of the
        # test guest; then test_init=False (no /init shell to wait for).
        self.art = {} if kernel else build_artifacts()
        self.kernel = kernel or self.art['KERNEL']
        self.initrd = initrd or self.art['INITRD']
        self.disk = disk
        self.test_init = test_init
        self.on_reboot = on_reboot
        # Another libvirtd (ufo_tools.nshost); a defined domain, as Nova's
        # are; <vcpu cpuset>; <metadata> content.
        self.uri = uri or LIBVIRT_URI
        self.persistent = persistent
        self.cpuset = cpuset
        self.metadata = metadata
        self.vcpus = vcpus
        self.memory_mib = memory_mib
        tag = uuid.uuid4().hex[:10]
        self.name = NAME_PREFIX + tag
        self.tap = self.mac = None
        if nic:
            self.tap = TAP_PREFIX + tag[:9]     # the kernel's 15 at most
            self.mac = '52:54:00:%s:%s:%s' % (tag[:2], tag[2:4], tag[4:6])
        self.shm_name = 'ufo-test-' + tag
        self.shm_path = os.path.join(SHM_DIR, self.shm_name)
        self._extra_shm = []
        self._tmp = tempfile.mkdtemp(prefix='ufo-guest-', dir=workdir)
        os.chmod(self._tmp, 0o755)
        self.log_path = os.path.join(self._tmp, 'console.log')
        params = []
        if nic:
            params.append('ufo.net=1')
        if watchdog_ms is not None:
            params.append('ufo_guest.watchdog_ms=%d' % watchdog_ms)
        if poll_ms is not None:
            params.append('ufo_guest.poll_ms=%d' % poll_ms)
        self.cmdline = ' '.join(BASE_CMDLINE + params + [cmdline]).strip()
        self.channel = None
        self.console = None
        self.dom = None
        self.conn = None
        self._beat_stop = threading.Event()
        self._beat_paused = threading.Event()
        self._beat_thread = None
        self._beat_lock = threading.Lock()
        self.last_beat = None
        self._channels = []
        self._with_channel = channel

    def start(self, boot_timeout=180.0, boot_retries=None):
        """Start the domain; wait for the test guest's shell.

        ``boot_retries``: see :class:`GuestBoot`.
        """
        try:
            self._start(boot_timeout, boot_retries)
        except BaseException:
            self.close()
            raise
        return self

    def _start(self, boot_timeout, boot_retries):
        # Copies readable by the QEMU user (the cache may sit in /root).
        kernel = os.path.join(self._tmp, 'vmlinuz')
        initrd = os.path.join(self._tmp, 'initrd.gz')
        shutil.copy(self.kernel, kernel)
        shutil.copy(self.initrd, initrd)
        for p in (kernel, initrd):
            os.chmod(p, 0o644)
        devices = ''
        if self.disk:
            devices += ("<disk type='file' device='disk'><driver name='qemu' "
                        "type='raw'/><source file='%s'/><target dev='vda' "
                        "bus='virtio'/></disk>" % saxutils.escape(self.disk))
        if self._with_channel:
            self.channel = host_channel.HostChannel(
                self.shm_path, self.vcpus,
                size=SHM_SIZE_MIB * 1024 * 1024)
            self.channel.initialize()
            _give_to_qemu(self.shm_path)
            devices += libvirt_config.shmem_xml(self.shm_name, SHM_SIZE_MIB)
        if self.tap:
            devices += ("<interface type='ethernet'><mac address='%s'/>"
                        "<target dev='%s' managed='yes'/>"
                        "<model type='virtio'/></interface>"
                        % (self.mac, self.tap))
        dtype = 'kvm' if accel() == 'kvm' else 'qemu'
        xml = """
<domain type='%(dtype)s'>
  <name>%(name)s</name>
  <memory unit='MiB'>%(mem)d</memory>%(metadata)s
  <vcpu placement='static'%(cpuset)s>%(vcpus)d</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>%(kernel)s</kernel>
    <initrd>%(initrd)s</initrd>
    <cmdline>%(cmdline)s</cmdline>
  </os>
  <features><acpi/></features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>%(on_reboot)s</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <serial type='pty'><target port='0'/></serial>
    <console type='pty'><target type='serial' port='0'/></console>
    <memballoon model='none'/>
    %(devices)s
  </devices>
</domain>""" % dict(dtype=dtype, name=self.name, mem=self.memory_mib,
                    on_reboot=self.on_reboot,
                    vcpus=self.vcpus, kernel=saxutils.escape(kernel),
                    initrd=saxutils.escape(initrd),
                    cmdline=saxutils.escape(self.cmdline), devices=devices,
                    metadata=('\n  <metadata>%s</metadata>' % self.metadata
                              if self.metadata else ''),
                    cpuset=(" cpuset='%s'" % self.cpuset
                            if self.cpuset else ''))
        self.conn = self.libvirt.open(self.uri)
        if self.persistent:
            self.dom = self.conn.defineXML(xml)
        self._xml = xml
        if self.channel:
            self.start_heartbeat()
        if not self.test_init:
            self._start_domain()
            return self
        GuestBoot(self.name, self._start_domain, self._stop_domain,
                  boot_timeout, boot_retries, self.diagnose).begin().wait()
        return self

    def _start_domain(self):
        if self.persistent:
            self.dom.create()
        else:
            self.dom = self.conn.createXML(self._xml, 0)
        # Opened for appending: the log keeps every boot.
        self.console = serial_console(self.dom, self.log_path)
        self.console.diagnose = self.diagnose
        return self.console

    def _stop_domain(self):
        stop_domain(self.dom, self.console)

    def diagnose(self):
        """What QEMU and the host say about a guest that went silent."""
        return diagnose(self.dom)

    # -- heartbeat --------------------------------------------------------

    def _beater(self, interval):
        while not self._beat_stop.wait(interval):
            with self._beat_lock:
                if not self._beat_paused.is_set() and self.channel:
                    self.channel.beat()
                    self.last_beat = time.monotonic()

    def start_heartbeat(self, interval=0.2):
        self._beat_paused.clear()
        if self._beat_thread is None:
            self._beat_thread = threading.Thread(
                target=self._beater, args=(interval,), daemon=True)
            self._beat_thread.start()

    def pause_heartbeat(self):
        """Stop beating; returns the time of the last beat."""
        with self._beat_lock:
            self._beat_paused.set()
            return self.last_beat

    def resume_heartbeat(self):
        with self._beat_lock:
            self._beat_paused.clear()
            if self.channel:
                self.channel.beat()
                self.last_beat = time.monotonic()

    def swap_channel(self, channel):
        """Make the heartbeat thread serve another page; returns the old."""
        with self._beat_lock:
            old, self.channel = self.channel, channel
            return old

    # -- devices ----------------------------------------------------------

    def new_channel(self, name, size_mib=SHM_SIZE_MIB):
        """An initialized page for a device to attach later."""
        path = os.path.join(SHM_DIR, name)
        self._extra_shm.append(path)
        ch = host_channel.HostChannel(path, self.vcpus,
                                      size=size_mib * 1024 * 1024)
        self._channels.append(ch)
        ch.initialize()
        return ch

    def attach_shmem(self, name, size_mib=SHM_SIZE_MIB):
        """Hot-attach a shmem device (its page set up beforehand)."""
        path = os.path.join(SHM_DIR, name)
        self._extra_shm.append(path)
        if not os.path.exists(path):
            with open(path, 'wb') as f:
                f.truncate(size_mib * 1024 * 1024)
        _give_to_qemu(path)
        self.dom.attachDeviceFlags(libvirt_config.shmem_xml(name, size_mib),
                                   self.libvirt.VIR_DOMAIN_AFFECT_LIVE)

    def detach_shmem(self, name, size_mib=SHM_SIZE_MIB):
        self.dom.detachDeviceFlags(libvirt_config.shmem_xml(name, size_mib),
                                   self.libvirt.VIR_DOMAIN_AFFECT_LIVE)

    def online_cpus(self):
        return online_cpus(self.console)

    def module_state(self):
        rc, out = self.console.run('cat /sys/kernel/debug/ufo_guest/state')
        state = {}
        for line in out:
            k, _, v = line.partition(' ')
            state[k] = v
        return state

    def close(self):
        self._beat_stop.set()
        if self._beat_thread is not None:
            self._beat_thread.join(2)
        if self.dom is not None:
            try:
                self.dom.destroy()
            except self.libvirt.libvirtError:
                # The connection may have died with libvirtd: try anew,
                # so no guest outlives its test.
                self._destroy_by_name()
            if self.persistent:
                self._undefine_by_name()
        if self.console is not None:
            self.console.close()
        if self.conn is not None:
            try:
                self.conn.close()
            except self.libvirt.libvirtError:
                pass
        for ch in [self.channel] + self._channels:
            if ch is not None:
                ch.close()
        for path in [self.shm_path] + self._extra_shm:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        # Keep the console log for diagnosis; the rest goes.
        if os.path.exists(self.log_path):
            os.makedirs(LOG_DIR, exist_ok=True)
            shutil.copy(self.log_path,
                        os.path.join(LOG_DIR, self.name + '.log'))
            self.log_path = os.path.join(LOG_DIR, self.name + '.log')
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _destroy_by_name(self, undefine=False):
        try:
            conn = self.libvirt.open(self.uri)
        except self.libvirt.libvirtError:
            return
        try:
            dom = conn.lookupByName(self.name)
            if undefine:
                dom.undefine()
            else:
                dom.destroy()
        except self.libvirt.libvirtError:
            pass
        finally:
            conn.close()

    def _undefine_by_name(self):
        self._destroy_by_name(undefine=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
