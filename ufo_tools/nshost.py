"""A second (and third) libvirt "host" on this machine, for migration tests.

:class:`NamespaceHost` runs its own ``libvirtd`` in a mount and UTS
namespace of its own: its own hostname and host UUID (libvirt refuses to
migrate a guest to a host with the same name or UUID), and private
``/run`` (sockets, pid files), ``/var/lib/libvirt``, ``/var/log/libvirt``,
``/var/cache/libvirt``, ``/etc/libvirt`` (a copy with the settings below)
and ``/dev/shm`` (the guests' channel pages). ``/tmp`` and ``/proc`` stay
shared, so a direct kernel boot's files are seen by every host, and a
process outside, or another host's libvirtd, reaches a host's libvirtd
through ``/proc/<pid>/root/run/libvirt/libvirt-sock``
(:attr:`NamespaceHost.uri`, ``qemu+unix:///system?socket=...``: libvirt
refuses a peer-to-peer migration to a URI that names neither a server nor
a unix socket, as "to the same host").

The hosts share the network namespace (none of their own is needed): QEMU
migrates over loopback, each destination listening on a port range of
its own. Their QEMU processes
run without cgroups (``cgroup_controllers = []``: the hosts would
otherwise share cgroup paths such as ``machine/qemu-1-<name>``; libvirt
then pins with ``sched_setaffinity``) and write their logs themselves (no
virtlogd).

:meth:`NamespaceHost.run` runs a command inside (an agent, ``virsh``);
:meth:`NamespaceHost.close` destroys its domains, stops its libvirtd and
every process started in it, and so drops the namespaces and their
mounts. Needs root, ``unshare`` and ``nsenter`` (util-linux).
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid as uuid_mod

QEMU_CONF = """
cgroup_controllers = [ ]
stdio_handler = "file"
migration_port_min = %(port_min)d
migration_port_max = %(port_max)d
"""

LIBVIRTD_CONF = """
host_uuid = "%(host_uuid)s"
log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
"""

SETUP = r"""
set -e
mount -t tmpfs -o mode=755 ufo-run /run
mkdir -p /run/libvirt /run/lock
mount -t tmpfs -o mode=1777 ufo-shm /dev/shm
mount --bind "$W/etc" /etc/libvirt
mount --bind "$W/lib" /var/lib/libvirt
mount --bind "$W/log" /var/log/libvirt
mount --bind "$W/cache" /var/cache/libvirt
hostname "$NAME"
touch "$W/ready"
exec sleep infinity
"""


class NamespaceHost:
    """One libvirt host in namespaces of its own; see the module doc."""

    def __init__(self, name, port_base, workdir=None):
        self.name = name
        self.port_base = port_base
        self.host_uuid = str(uuid_mod.uuid4())
        self.work = tempfile.mkdtemp(prefix='ufo-nshost-%s-' % name,
                                     dir=workdir)
        self.holder = None
        self._procs = []

    # -- set-up ---------------------------------------------------------
    def _prepare(self):
        w = self.work
        shutil.copytree('/etc/libvirt', os.path.join(w, 'etc'),
                        symlinks=True)
        # No network or storage pool of the host's own autostarts here.
        for sub in ('qemu', 'storage'):
            shutil.rmtree(os.path.join(w, 'etc', sub), ignore_errors=True)
        os.makedirs(os.path.join(w, 'etc', 'qemu', 'networks'))
        with open(os.path.join(w, 'etc', 'qemu.conf'), 'a') as conf:
            conf.write(QEMU_CONF % {'port_min': self.port_base,
                                    'port_max': self.port_base + 63})
        with open(os.path.join(w, 'etc', 'libvirtd.conf'), 'a') as conf:
            conf.write(LIBVIRTD_CONF % {'host_uuid': self.host_uuid})
        for sub in ('log', 'cache'):
            os.makedirs(os.path.join(w, sub))
        os.makedirs(os.path.join(w, 'log', 'qemu'))
        lib = os.path.join(w, 'lib')
        os.makedirs(lib)
        shutil.copystat('/var/lib/libvirt', lib)
        qemu_dir = os.path.join(lib, 'qemu')
        os.makedirs(qemu_dir)
        st = os.stat('/var/lib/libvirt/qemu')
        os.chown(qemu_dir, st.st_uid, st.st_gid)
        os.chmod(qemu_dir, st.st_mode & 0o7777)
        # QEMU's capabilities, probed once by the host's own libvirtd.
        caps = '/var/cache/libvirt/qemu'
        if os.path.isdir(caps):
            shutil.copytree(caps, os.path.join(w, 'cache', 'qemu'))

    def start(self, timeout=60.0):
        try:
            self._start(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def _start(self, timeout):
        self._prepare()
        env = dict(os.environ, W=self.work, NAME=self.name)
        self.holder = subprocess.Popen(
            ['unshare', '--mount', '--uts', '--propagation', 'private',
             'sh', '-c', SETUP], env=env, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not os.path.exists(os.path.join(self.work, 'ready')):
            if self.holder.poll() is not None:
                raise RuntimeError('namespace set-up of %s failed (%d)'
                                   % (self.name, self.holder.returncode))
            if time.monotonic() > deadline:
                raise RuntimeError('namespace set-up of %s timed out'
                                   % self.name)
            time.sleep(0.05)
        # sh execs sleep: the holder's pid is the namespaces' first process.
        subprocess.run(self.command(['libvirtd', '-d']), check=True,
                       timeout=timeout)
        while True:
            if subprocess.run(['virsh', '-c', self.uri, 'version'],
                              capture_output=True).returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError('libvirtd of %s does not answer:\n%s'
                                   % (self.name, self.log_text()))
            time.sleep(0.2)

    # -- inside ---------------------------------------------------------
    @property
    def root(self):
        """This host's file system, as seen from outside."""
        return '/proc/%d/root' % self.holder.pid

    @property
    def socket(self):
        return self.root + '/run/libvirt/libvirt-sock'

    @property
    def uri(self):
        """A libvirt URI that reaches this host's libvirtd from anywhere."""
        return 'qemu+unix:///system?socket=' + self.socket

    def path(self, inside):
        """A path of this host's file system, seen from outside."""
        return self.root + inside

    def command(self, argv):
        """``argv`` run inside this host's namespaces."""
        return ['nsenter', '-t', str(self.holder.pid), '-m', '-u',
                '--'] + list(argv)

    def popen(self, argv, **kwargs):
        """Start a process inside; :meth:`close` ends it."""
        proc = subprocess.Popen(self.command(argv), **kwargs)
        self._procs.append(proc)
        return proc

    def libvirtd_pid(self):
        try:
            with open(self.path('/run/libvirtd.pid')) as handle:
                return int(handle.read().strip())
        except (OSError, ValueError):
            return None

    def log_text(self):
        try:
            with open(os.path.join(self.work, 'log', 'libvirtd.log')) as f:
                return f.read()[-4000:]
        except OSError:
            return ''

    # -- tear-down ------------------------------------------------------
    def _destroy_domains(self):
        try:
            import libvirt
        except ImportError:
            return
        try:
            conn = libvirt.open(self.uri)
        except libvirt.libvirtError:
            return
        try:
            for dom in conn.listAllDomains(0):
                try:
                    if dom.isActive():
                        dom.destroy()
                except libvirt.libvirtError:
                    pass
                try:
                    dom.undefine()
                except libvirt.libvirtError:
                    pass
        finally:
            conn.close()

    def close(self):
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if self.holder is not None and self.holder.poll() is None:
            self._destroy_domains()
            pid = self.libvirtd_pid()
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGTERM)
                    for _ in range(100):
                        os.kill(pid, 0)
                        time.sleep(0.1)
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.holder.terminate()
            self.holder.wait(30)
        shutil.rmtree(self.work, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
