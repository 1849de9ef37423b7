"""Host side of the UFO channel: one shared page per guest.

The page lives in a file that QEMU maps as the memory of an ivshmem-plain
PCI device (libvirt ``<shmem name='X'>`` maps ``/dev/shm/X``). The host
writes its area under its seqlock and reads the guest area with bounded
seqlock retries. Every guest-written value is validated against what the
host knows (the domain's vCPU count, the targets it issued, the previous
sample); no guest value is used to index, size or allocate anything.

The host does not map the file: it reads and writes it with ``pread`` and
``pwrite``, which see the same page as QEMU's mapping. A file truncated
under a mapping kills the process that touches it (SIGBUS); a short read
is only a page that is not there.
"""

import errno
import functools
import grp
import os
import pwd
import re
import stat
import struct
import threading
import time

from ufo_agent.channel import layout
from ufo_agent.channel import report

DEFAULT_SHM_SIZE = 1024 * 1024
MAX_CTXSW_PER_SEC = 10 ** 9
MAX_INTERVAL_NS = 3600 * 10 ** 9
# Reading a torn area: spins, and a time budget for all of them together.
READ_RETRIES = 100
READ_BUDGET_NS = 200 * 1000
# libvirt's QEMU user and group on Debian and Ubuntu: the defaults of
# [channel] qemu_user and qemu_group (RHEL-family hosts: qemu and qemu).
DEFAULT_QEMU_USER = 'libvirt-qemu'
DEFAULT_QEMU_GROUP = 'kvm'
PAGE_MODE = 0o660
_U32 = struct.Struct('<I')
_U64 = struct.Struct('<Q')
_U32_MAX = 0xFFFFFFFF
# Never follow a link planted at the page's (predictable) name, never
# block on a FIFO, never leak the descriptor into a child.
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _mask(words):
    """The online mask's words (least significant first) as one number."""
    mask = 0
    for i, word in enumerate(words):
        mask |= word << (64 * i)
    return mask


@functools.lru_cache(maxsize=1024)
def _online_cpus(mask, max_vcpus):
    # Guests keep the same few masks tick after tick.
    return tuple(c for c in range(max_vcpus) if mask >> c & 1)


class ChannelError(Exception):
    pass


class UnsafePage(ChannelError):
    """The page path holds something the agent must not use or touch."""


class TruncatedPage(ChannelError):
    """The page file ends before the page does."""


def shm_name(domain_uuid, prefix='ufo-'):
    """The shmem device name of a domain: also its file in /dev/shm."""
    name = prefix + str(domain_uuid)
    if not re.match(r'^[A-Za-z0-9._-]{1,200}$', name):
        raise ValueError('unsafe shmem name %r' % name)
    return name


def _numeric_id(name):
    """The id a decimal ``name`` stands for, or None for a name.

    Under Kolla, QEMU runs as nova:nova of its container (42436), ids that
    have no name on the host: such an id is taken as it is. Account names
    are never all digits (useradd and systemd refuse them).
    """
    if re.fullmatch(r'[0-9]{1,10}', name) and int(name) < 0xFFFFFFFF:
        return int(name)
    return None


def qemu_ids(user, group):
    """(uid, gid) of QEMU's user and group, None for one that is missing.

    Each is a name looked up on the host or a numeric id.
    """
    uid = _numeric_id(user)
    if uid is None:
        try:
            uid = pwd.getpwnam(user).pw_uid
        except KeyError:
            pass
    gid = _numeric_id(group)
    if gid is None:
        try:
            gid = grp.getgrnam(group).gr_gid
        except KeyError:
            pass
    return uid, gid


def qemu_owner(user, group):
    """(uid, gid) QEMU runs as, or None where either does not exist.

    ``user`` and ``group`` are those of libvirt's qemu.conf (``[channel]
    qemu_user`` and ``qemu_group``).
    """
    uid, gid = qemu_ids(user, group)
    if uid is None or gid is None:
        return None
    return uid, gid


def page_owner(user, group):
    """(uid, gid) to give a new page to, so that QEMU can map it; or None.

    As root: QEMU's user and group. As any other user (ufo-agent's own),
    which cannot give files away: the agent keeps the file (uid -1, left
    as it is) and gives it QEMU's group, which it must be a member of
    (:func:`group_problem`); QEMU opens it through the group (mode 0660).
    None where QEMU's user or group does not exist.
    """
    owner = qemu_owner(user, group)
    if owner is None or os.geteuid() == 0:
        return owner
    return -1, owner[1]


def group_problem(user, group):
    """Why this process cannot hand pages to QEMU, or '' when it can."""
    owner = qemu_owner(user, group)
    if owner is None or os.geteuid() == 0:
        return ''
    if owner[1] in os.getgroups() or owner[1] == os.getegid():
        return ''
    return ('ufo-agent runs as uid %d, which is not in group %s, the group '
            'QEMU (%s) runs as: QEMU could not map the guests\' channel '
            'pages. Add the user to group %s (the packaged sysusers.d file '
            'adds it to kvm, QEMU\'s group on Debian and Ubuntu) or run '
            'ufo-agent as root' % (os.geteuid(), group, user, group))


def trusted_uids(qemu=None):
    """Owners a page file may have: root, this process and QEMU's user.

    ``qemu``: (uid, gid) of QEMU (:func:`qemu_owner`), or a page owner
    (:func:`page_owner`, whose uid -1 adds nothing), or None.

    /dev/shm is world-writable: anybody can create a file at a page's
    predictable name before the agent does. Such a file is never used.
    """
    uids = {0, os.geteuid()}
    if qemu is not None and qemu[0] != -1:
        uids.add(qemu[0])
    return uids


def _check_page(fd, path, trusted):
    """fstat the open page; raise UnsafePage unless it is ours to use."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePage('%s is not a regular file (mode 0o%o)'
                         % (path, st.st_mode))
    if st.st_uid not in trusted:
        raise UnsafePage('%s belongs to uid %d, not to root or QEMU: '
                         'refusing it' % (path, st.st_uid))
    if st.st_nlink != 1:
        raise UnsafePage('%s has %d hard links' % (path, st.st_nlink))
    return st


def _hand_over(fd, st, owner, created):
    """Give an open page to QEMU: fchown/fchmod on the descriptor."""
    if owner is None:
        return
    uid, gid = owner
    if uid == -1:
        # Not root: only a page of our own can get QEMU's group.
        if created or (st.st_uid == os.geteuid() and
                       (st.st_gid, stat.S_IMODE(st.st_mode)) !=
                       (gid, PAGE_MODE)):
            os.fchown(fd, -1, gid)
            os.fchmod(fd, PAGE_MODE)
        return
    if created or st.st_uid != uid:
        os.fchown(fd, uid, gid)
        os.fchmod(fd, PAGE_MODE)


def open_page(path, size, owner=None, trusted=None, create=True):
    """Open the page file at ``path``, creating it if missing.

    Safe in a world-writable sticky directory such as /dev/shm, also with
    ``fs.protected_regular`` and ``fs.protected_symlinks`` set:

    * a new file is created with ``O_CREAT | O_EXCL`` (mode 0600), an
      existing one is opened without ``O_CREAT`` (which protected_regular
      refuses, even to root, for a file QEMU owns);
    * ``O_NOFOLLOW``: a symbolic link at the path is refused;
    * the open file must be a regular file with one link, owned by one of
      ``trusted`` (default: root, this process and ``owner``'s uid, see
      :func:`trusted_uids`);
    * ``owner`` (uid, gid), when given, is applied with ``fchown`` and
      mode 0660 with ``fchmod``, on the descriptor, to a file created
      here or not yet owned by that uid (uid -1: see :func:`page_owner`);
    * ``create=False``: a missing file is an error (ChannelError), never
      created.

    Returns (fd, created). Raises :class:`UnsafePage` or OSError.
    """
    if trusted is None:
        trusted = trusted_uids(owner)
    for _ in range(3):
        created = create
        try:
            if not create:
                raise FileExistsError
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL |
                         _OPEN_FLAGS, 0o600)
        except FileExistsError:
            created = False
            try:
                fd = os.open(path, os.O_RDWR | _OPEN_FLAGS)
            except FileNotFoundError:
                if not create:
                    raise ChannelError('%s does not exist' % path)
                continue            # removed in between: create it
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise UnsafePage('%s is a symbolic link' % path)
                if exc.errno in (errno.EISDIR, errno.ENXIO):
                    raise UnsafePage('%s is not a regular file: %s'
                                     % (path, exc.strerror))
                raise
        try:
            st = _check_page(fd, path, trusted)
            _hand_over(fd, st, owner, created)
            if st.st_size < size:
                os.ftruncate(fd, size)
        except BaseException:
            os.close(fd)
            raise
        return fd, created
    raise ChannelError('%s keeps disappearing' % path)


def hand_to_qemu(path, user, group):
    """Make an existing page file usable by QEMU (libvirt does not).

    The file is opened without following links and checked like
    :func:`open_page`; ownership and mode change on the descriptor.
    Returns False where QEMU's user or group does not exist.
    """
    owner = qemu_owner(user, group)
    if owner is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY | _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePage('%s is a symbolic link' % path)
        raise
    try:
        _check_page(fd, path, trusted_uids(owner))
        os.fchown(fd, owner[0], owner[1])
        os.fchmod(fd, PAGE_MODE)
    finally:
        os.close(fd)
    return True


def remove_page(path, trusted=None):
    """Unlink a page file: only a regular file one of ``trusted`` owns.

    ``trusted`` (from :func:`trusted_uids`) defaults to root and this
    process.

    ``lstat``, so a link is never followed. Returns True when removed,
    False when there was nothing to remove; raises :class:`UnsafePage`
    for anything else at the path.
    """
    if trusted is None:
        trusted = trusted_uids()
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode):
        raise UnsafePage('%s is not a regular file: not removing it' % path)
    if st.st_uid not in trusted:
        raise UnsafePage('%s belongs to uid %d: not removing it'
                         % (path, st.st_uid))
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


class HostChannel(object):
    """The host end of one guest's shared page.

    :param path: the page file, e.g. ``/dev/shm/ufo-<uuid>``; created
        when missing and grown to ``size`` bytes (the shmem size), see
        :func:`open_page` for what is refused.
    :param max_vcpus: vCPUs of the domain, as the host configured it.
    :param owner: (uid, gid) to give the page to (from :func:`page_owner`),
        or None to leave ownership alone.
    :param trusted: uids the page may belong to (:func:`trusted_uids`),
        when opened and when unlinked; see :func:`open_page` for the
        default.
    :param create: False to open only an existing page (``--restore``).
    """

    def __init__(self, path, max_vcpus, size=DEFAULT_SHM_SIZE, owner=None,
                 trusted=None, create=True):
        if not 1 <= max_vcpus <= layout.MASK_CPUS:
            raise ValueError('max_vcpus must be in 1..%d' % layout.MASK_CPUS)
        if size < layout.PAGE_SIZE or size & (size - 1):
            raise ValueError('size must be a power of two >= one page')
        self.path = path
        self.max_vcpus = max_vcpus
        self._fd = None
        if trusted is None:
            trusted = trusted_uids(owner)
        self._trusted = frozenset(trusted)
        self._size = size
        self._fd, self.created = open_page(path, size, owner, self._trusted,
                                           create=create)
        self._host_seq = 0
        self._target = 0
        self._target_seq = 0
        self._last_count = None
        self._last_ts = None
        # (sample count, vCPUs online) of the last valid sample as first
        # published: its figures were taken over those vCPUs.
        self._sample_online = None
        # (sample count, timestamp) the guest area held when the guest
        # restarted, until its new boot's module publishes.
        self._previous_boot = None
        # (guest area bytes, validation state, report) of the last read.
        self._memo = None
        # The host area is written from the agent loop (targets) and from
        # its heartbeat thread: one writer at a time keeps the seqlock.
        self._lock = threading.Lock()

    # -- host area --------------------------------------------------------

    def initialize(self):
        """Set up the host area, keeping a live guest's state.

        A page without the host magic (new, or garbage) is zeroed first.
        Otherwise the target sequence continues where the page left it, so
        that a restarted agent never makes the sequence run backwards, and
        the target the page holds, the last one of an agent that is gone,
        becomes every vCPU under a new sequence number. Written with a
        fresh heartbeat, the old target would be taken up again by a
        guest whose watchdog had brought its vCPUs back: it would take
        them offline before this agent decided anything.
        """
        with self._lock:
            self._initialize()

    def _initialize(self):
        try:
            host = self._read_area(layout.HOST_OFFSET, layout.HOST_STRUCT,
                                   layout.HOST_FIELDS)
            guest = self._read_guest_area()
        except TruncatedPage:
            self._restore_size()
            host = guest = None
        if (host is not None and host['magic'] == layout.HOST_MAGIC and
                host['abi_version'] == layout.ABI_VERSION):
            self._host_seq = host['seq'] & ~1
            self._target_seq = host['target_seq']
            if guest is not None and guest.magic == layout.GUEST_MAGIC:
                self._target_seq = max(self._target_seq,
                                       guest.ack_target_seq)
            if self._target_seq:
                self._target = self.max_vcpus
                self._target_seq = (self._target_seq + 1) & _U32_MAX or 1
            else:
                self._target = 0            # no target was ever sent
        else:
            self._write(0, bytes(layout.PAGE_SIZE))
            self._host_seq = 0
            self._target_seq = 0
            self._target = 0
        self._write_host()
        self.reset_history()

    def _write_host(self):
        values = {
            'magic': layout.HOST_MAGIC,
            'abi_version': layout.ABI_VERSION,
            'heartbeat': time.monotonic_ns(),
            'target_vcpus': self._target,
            'target_seq': self._target_seq,
            'max_vcpus': self.max_vcpus,
        }
        seq_off = layout.offset('host', 'seq')
        self._host_seq = (self._host_seq + 1) & _U32_MAX
        if not self._host_seq & 1:
            self._host_seq = (self._host_seq + 1) & _U32_MAX
        self._write(seq_off, _U32.pack(self._host_seq))
        values['seq'] = self._host_seq
        data = layout.pack(layout.HOST_FIELDS, layout.HOST_STRUCT, values)
        self._write(layout.HOST_OFFSET, data)
        self._host_seq = (self._host_seq + 1) & _U32_MAX
        self._write(seq_off, _U32.pack(self._host_seq))

    def _write(self, offset, data):
        """Write into the page; past a truncated end the file grows."""
        if os.pwrite(self._fd, data, offset) != len(data):
            raise OSError(errno.EIO, 'short write to %s' % self.path)

    def _restore_size(self):
        """Grow a truncated page file back, zero-filled, to its size.

        QEMU still maps the whole device: past the file's end the guest's
        accesses would kill QEMU.
        """
        try:
            if os.fstat(self._fd).st_size < self._size:
                os.ftruncate(self._fd, self._size)
        except OSError:
            pass        # the next read says it is still truncated

    def _read(self, offset, size):
        """Read from the page; raises TruncatedPage past the file's end."""
        data = os.pread(self._fd, size, offset)
        if len(data) != size:
            raise TruncatedPage('%s is truncated to %d bytes' % (
                self.path, os.fstat(self._fd).st_size))
        return data

    def beat(self):
        """Refresh the heartbeat; call at least every second.

        Safe from another thread; a closed channel is left alone.
        """
        with self._lock:
            if self._fd is not None:
                self._write_host()

    @property
    def target(self):
        return self._target

    @property
    def target_seq(self):
        return self._target_seq

    def set_target(self, vcpus):
        """Ask the guest to keep ``vcpus`` online; returns the target seq."""
        if not 1 <= vcpus <= self.max_vcpus:
            raise ValueError('target must be in 1..%d' % self.max_vcpus)
        with self._lock:
            self._target = vcpus
            self._target_seq = (self._target_seq + 1) & _U32_MAX or 1
            self._write_host()
            return self._target_seq

    # -- guest area -------------------------------------------------------

    def _read_area(self, base, st, fields, retries=READ_RETRIES,
                   budget_ns=READ_BUDGET_NS):
        """One consistent copy of an area as a dict, or None (torn)."""
        data = self._read_consistent(base, st.size, retries, budget_ns)
        return None if data is None else layout.unpack(fields, st, data)

    def _read_guest_area(self, retries=READ_RETRIES):
        """The guest area as a :class:`layout.GuestArea`, or None (torn)."""
        data = self._read_consistent(layout.GUEST_OFFSET, layout.GUEST_SIZE,
                                     retries, READ_BUDGET_NS)
        return None if data is None else layout.unpack_guest(data)

    def _read_consistent(self, base, size, retries, budget_ns):
        """One consistent copy of an area's bytes, or None when it stays torn.

        Two reads in a row that are equal and hold an even ``seq`` are a
        state the area had: a write between or during them would have
        left ``seq`` odd or changed it in the later read (the writer
        makes it odd before it writes and even, one higher, after). The
        writer holds ``seq`` odd for a few stores; a guest that holds it
        odd longer, or keeps changing the area (preempted mid-write, or
        on purpose), costs at most ``retries`` reads more and
        ``budget_ns`` of the agent's time, never a sleep.
        """
        deadline = time.monotonic_ns() + budget_ns
        data = self._read(base, size)
        for _ in range(max(1, retries)):
            again = self._read(base, size)
            # seq is at offset 8 of either area, little-endian.
            if again == data and not again[8] & 1:
                return again
            data = again
            if time.monotonic_ns() >= deadline:
                break
        return None

    def reset_history(self):
        """Forget the last sample, e.g. after the guest rebooted."""
        self._last_count = None
        self._last_ts = None
        self._sample_online = None

    def guest_restarted(self):
        """The guest's kernel starts over: its area is the last boot's.

        That area is no report of the new boot until the new boot's
        module publishes: a target sent on it would wait for a module
        that is not loaded yet. The new boot's counters start over.
        """
        self.reset_history()
        try:
            g = self._read_guest_area(READ_RETRIES)
        except (TruncatedPage, OSError):
            g = None
        self._previous_boot = None if g is None or g.magic == 0 else \
            (g.sample_count, g.timestamp_ns)

    def guest_stopped(self):
        """The guest's QEMU exited: nothing writes its area any more.

        Cleared, so that a QEMU started later on this page is not taken
        for one whose module answers before its module has loaded.
        """
        self._write(layout.GUEST_OFFSET, bytes(layout.GUEST_SIZE))
        self.reset_history()
        self._previous_boot = None

    def read_guest(self, retries=READ_RETRIES):
        """Read and validate the guest area: a :class:`report.GuestReport`.

        The area is read on every call. Bytes equal to the last read's,
        met with the state its validation left unchanged, give its report
        again, not decoded anew (the enforcer reads a page many times a
        tick waiting for an answer): validation is a function of the
        bytes and of that state alone (the history of samples, the last
        target sequence sent).
        """
        try:
            data = self._read_consistent(
                layout.GUEST_OFFSET, layout.GUEST_SIZE, retries,
                READ_BUDGET_NS)
        except TruncatedPage as exc:
            self.reset_history()
            self._restore_size()
            return report.GuestReport(report.STATUS_INVALID, str(exc))
        except OSError as exc:
            self.reset_history()
            return report.GuestReport(report.STATUS_INVALID,
                                      'cannot read %s: %s' % (self.path, exc))
        if data is None:
            return report.GuestReport(
                report.STATUS_BUSY, 'guest area sequence odd or changing on '
                'every read for %d us' % (READ_BUDGET_NS // 1000))
        state = self._validation_state()
        memo = self._memo
        if memo is not None and memo[0] == data and memo[1] == state:
            return memo[2]
        result = self._guest_report(layout.unpack_guest(data))
        # Kept only if validating changed nothing it depends on: the same
        # bytes and state then give the same report.
        self._memo = ((data, state, result)
                      if self._validation_state() == state else None)
        return result

    def _validation_state(self):
        # Everything of the host's that a guest area is judged against.
        return (self._previous_boot, self._last_count, self._last_ts,
                self._sample_online,
                self._target_seq, self.max_vcpus)

    def _guest_report(self, g):
        """The report of a consistent guest area ``g`` (a GuestArea)."""
        if g.magic == 0:
            self.reset_history()
            return report.GuestReport(report.STATUS_ABSENT,
                                      'no guest module bound')
        if self._previous_boot is not None:
            if (g.sample_count, g.timestamp_ns) == self._previous_boot:
                return report.GuestReport(
                    report.STATUS_ABSENT, 'no sample from the guest module '
                    'since the guest restarted')
            self._previous_boot = None
        mask = _mask(g.online_mask)
        reason = self._validate(g, mask)
        if reason:
            return report.GuestReport(report.STATUS_INVALID, reason)
        taken = self._sample_online
        if taken is None or taken[0] != g.sample_count:
            self._sample_online = (g.sample_count, g.online_vcpus)
        sample = report.GuestSample(
            flags=g.flags,
            ack_target_seq=g.ack_target_seq,
            applied_target=g.applied_target,
            online_vcpus=g.online_vcpus,
            present_vcpus=g.present_vcpus,
            online_cpus=_online_cpus(mask, self.max_vcpus),
            sample_count=g.sample_count,
            timestamp_ns=g.timestamp_ns,
            interval_ns=g.interval_ns,
            util=g.util / 100.0,
            steal=g.steal / 100.0,
            ctxsw_per_sec=g.ctxsw_per_sec,
            own_ctxsw_per_sec=g.own_ctxsw_per_sec,
            host_errors=g.host_errors,
            watchdog_fires=g.watchdog_fires,
            sched_in_per_sec=g.sched_in_per_sec
            if g.flags & layout.GUEST_FLAG_SCHED_IN else None,
            # Judged by ufo_agent.channel.latency, not here: a bad
            # latency report costs the guest its latency, not its page.
            latency_us=g.latency_us
            if g.flags & layout.GUEST_FLAG_LATENCY else None,
            latency_seq=g.latency_seq)
        return report.GuestReport(report.STATUS_OK, '', sample)

    def _validate(self, g, mask):
        """Returns why the guest area is invalid, or '' when it is valid.

        ``mask`` is its online mask as one number (:func:`_mask`).
        """
        nmax = self.max_vcpus
        if g.magic != layout.GUEST_MAGIC:
            return 'bad guest magic 0x%08x' % g.magic
        if g.abi_version != layout.ABI_VERSION:
            return 'unsupported guest ABI version %d' % g.abi_version
        if g.flags & ~layout.GUEST_FLAGS_KNOWN:
            return 'unknown guest flags 0x%x' % g.flags
        if not g.flags & layout.GUEST_FLAG_SCHED_IN and \
                g.sched_in_per_sec:
            return 'switch-in rate without its flag'
        online, present = g.online_vcpus, g.present_vcpus
        if not 1 <= present <= nmax:
            return 'present vCPUs %d not in 1..%d' % (present, nmax)
        if not 1 <= online <= present:
            return 'online vCPUs %d not in 1..%d' % (online, present)
        if mask >> nmax:
            return 'online mask has vCPUs beyond %d' % nmax
        if not mask & 1:
            return 'online mask lacks vCPU 0'
        if bin(mask).count('1') != online:
            return 'online mask disagrees with online count %d' % online
        if g.ack_target_seq > self._target_seq:
            return 'ack seq %d ahead of target seq %d' % (
                g.ack_target_seq, self._target_seq)
        if g.ack_target_seq and not 1 <= g.applied_target <= nmax:
            return 'applied target %d not in 1..%d' % (
                g.applied_target, nmax)
        return self._validate_stats(g, online)

    def _validate_stats(self, g, online):
        # The module answers a shrink with its last sample, taken while
        # more vCPUs were online: judged by those, or its answer is lost.
        taken = self._sample_online
        if taken is not None and taken[0] == g.sample_count:
            online = max(online, taken[1])
        if g.util > 10000 * online:
            return 'utilization %d above 100%% x %d vCPUs' % (g.util,
                                                              online)
        if g.steal > 10000 * online:
            return 'steal %d above 100%% x %d vCPUs' % (g.steal, online)
        if g.ctxsw_per_sec > MAX_CTXSW_PER_SEC:
            return 'context switch rate %d is implausible' % (
                g.ctxsw_per_sec)
        if g.own_ctxsw_per_sec > MAX_CTXSW_PER_SEC:
            return 'own context switch rate %d is implausible' % (
                g.own_ctxsw_per_sec)
        # Each switch into a thread is one of the context switches.
        if g.sched_in_per_sec > g.ctxsw_per_sec:
            return 'switch-in rate %d above the context switch rate %d' % (
                g.sched_in_per_sec, g.ctxsw_per_sec)
        if g.sample_count and not 0 < g.interval_ns <= MAX_INTERVAL_NS:
            return 'sample interval %d ns out of range' % g.interval_ns
        return self._validate_history(g)

    def _validate_history(self, g):
        """Sample counter and timestamp must not run backwards."""
        count, ts = g.sample_count, g.timestamp_ns
        last_count, last_ts = self._last_count, self._last_ts
        # Re-base on the new values, so one bad jump is reported once.
        self._last_count, self._last_ts = count, ts
        if last_count is not None and count < last_count:
            return 'sample counter went backwards (%d < %d)' % (count,
                                                                last_count)
        if last_ts is not None and ts < last_ts:
            return 'timestamp went backwards'
        if last_count is not None and count > last_count and ts == last_ts:
            return 'new sample without a new timestamp'
        return ''

    def wait_ack(self, seq, timeout=10.0, poll=0.001):
        """Wait until the guest acknowledges target ``seq``.

        Returns (report, seconds from now to the acknowledgement) or raises
        ChannelError on timeout.
        """
        start = time.monotonic()
        deadline = start + timeout
        while True:
            report = self.read_guest()
            if report.ok and report.sample.ack_target_seq == seq:
                return report, time.monotonic() - start
            if time.monotonic() > deadline:
                raise ChannelError('no acknowledgement of target seq %d '
                                   'within %.1fs (last: %s %s)'
                                   % (seq, timeout, report.status,
                                      report.reason))
            time.sleep(poll)

    # -- raw access, for tests and diagnosis ------------------------------

    def write_raw(self, offset, data):
        if not 0 <= offset <= layout.PAGE_SIZE - len(data):
            raise ValueError('outside the page')
        self._write(offset, data)

    def read_raw(self):
        return self._read(0, layout.PAGE_SIZE)

    def close(self):
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def unlink(self):
        self.close()
        remove_page(self.path, self._trusted)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
