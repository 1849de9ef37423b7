"""Opening, handing over and removing page files safely.

The pages live in /dev/shm: world-writable and sticky, where anybody can
create a file, a FIFO or a link at a page's predictable name, and where
``fs.protected_regular`` forbids ``O_CREAT`` on another user's file even
to root. These tests run in a temporary directory; the functional test
``test_page_files.py`` runs a real agent in /dev/shm with the sysctls set.
"""

import errno
import grp
import os
import pwd
import stat

import pytest

from ufo_agent.channel import host_channel
from ufo_agent.channel import layout

VCPUS = 4
NOBODY = 65534


def _need_root():
    # The test command runs as root (README): chown to another user here
    # is the point of the test, so it fails rather than skips without.
    assert os.geteuid() == 0, 'run the tests as root (tools/run-tests.sh)'


def _page(tmp_path):
    return str(tmp_path / 'ufo-page')


@pytest.fixture
def opens(monkeypatch):
    """Record the flags of every os.open."""
    calls = []
    real_open = os.open

    def recording_open(path, flags, *args, **kwargs):
        calls.append((path, flags))
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, 'open', recording_open)
    return calls


def _by_path_forbidden(name, real):
    def fake(path, *args, **kwargs):
        if not isinstance(path, int):
            raise AssertionError('os.%s(%r): by path' % (name, path))
        return real(path, *args, **kwargs)
    return fake


@pytest.fixture
def no_path_chown(monkeypatch):
    """Ownership and mode may change only on a descriptor."""
    for name in ('chown', 'chmod', 'lchown'):
        monkeypatch.setattr(os, name,
                            _by_path_forbidden(name, getattr(os, name)))
    fchowns = []
    real_fchown = os.fchown

    def fchown(fd, uid, gid):
        fchowns.append((uid, gid))
        return real_fchown(fd, uid, gid)
    monkeypatch.setattr(os, 'fchown', fchown)
    return fchowns


def test_a_new_page_is_created_exclusively_without_following_links(
        tmp_path, opens):
    path = _page(tmp_path)
    ch = host_channel.HostChannel(path, VCPUS)
    ch.close()
    assert ch.created
    [(_, flags)] = [c for c in opens if c[0] == path]
    assert flags & os.O_CREAT and flags & os.O_EXCL
    assert flags & os.O_NOFOLLOW
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_an_existing_page_is_reopened_without_o_creat(tmp_path, opens):
    # fs.protected_regular refuses O_CREAT (without O_EXCL) on a file of
    # another user in a sticky directory: /dev/shm/X belongs to QEMU.
    path = _page(tmp_path)
    host_channel.HostChannel(path, VCPUS).close()
    del opens[:]
    ch = host_channel.HostChannel(path, VCPUS)
    ch.close()
    assert not ch.created
    for _, flags in opens:
        assert flags & os.O_NOFOLLOW
        assert not flags & os.O_CREAT or flags & os.O_EXCL
    assert any(not flags & os.O_CREAT for _, flags in opens)


def test_a_restarted_agent_keeps_the_page_content(tmp_path):
    path = _page(tmp_path)
    ch = host_channel.HostChannel(path, VCPUS)
    ch.initialize()
    seq = ch.set_target(2)
    guest = layout.pack(layout.GUEST_FIELDS, layout.GUEST_STRUCT, dict(
        magic=layout.GUEST_MAGIC, abi_version=layout.ABI_VERSION, seq=2,
        ack_target_seq=seq, applied_target=2, online_vcpus=2,
        present_vcpus=4, online_mask=(3, 0, 0, 0)))
    ch.write_raw(layout.GUEST_OFFSET, guest)
    before = ch.read_raw()
    ch.close()
    again = host_channel.HostChannel(path, VCPUS)
    assert again.read_raw() == before
    again.initialize()
    # The sequence goes on, with every vCPU until the agent decides.
    assert (again.target_seq, again.target) == (seq + 1, VCPUS)
    assert again.read_guest().ok
    again.close()


def test_a_page_qemu_owns_is_reopened_and_kept(tmp_path, no_path_chown):
    _need_root()
    path = _page(tmp_path)
    qemu = (NOBODY, NOBODY)
    ch = host_channel.HostChannel(path, VCPUS, owner=qemu)
    ch.initialize()
    ch.set_target(3)
    before = ch.read_raw()
    ch.close()
    st = os.stat(path)
    assert (st.st_uid, st.st_gid) == qemu
    assert stat.S_IMODE(st.st_mode) == 0o660
    assert no_path_chown == [qemu]
    again = host_channel.HostChannel(path, VCPUS, owner=qemu)
    assert again.read_raw() == before
    again.close()
    assert no_path_chown == [qemu]          # already QEMU's: left alone


def test_ownership_changes_on_the_descriptor_only(tmp_path, no_path_chown):
    me = (os.getuid(), os.getgid())
    path = _page(tmp_path)
    host_channel.HostChannel(path, VCPUS, owner=me).close()
    assert no_path_chown == [me]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o660


def test_hand_to_qemu_uses_the_descriptor(tmp_path, no_path_chown,
                                          monkeypatch):
    me = (os.getuid(), os.getgid())
    monkeypatch.setattr(host_channel, 'qemu_owner', lambda *a: me)
    path = _page(tmp_path)
    with open(path, 'wb') as handle:
        handle.truncate(4096)
    assert host_channel.hand_to_qemu(path, 'qemu', 'qemu')
    assert no_path_chown == [me]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o660


def test_hand_to_qemu_refuses_a_symlink(tmp_path, monkeypatch):
    monkeypatch.setattr(host_channel, 'qemu_owner',
                        lambda *a: (os.getuid(), os.getgid()))
    target = tmp_path / 'target'
    target.write_bytes(b'x')
    os.chmod(str(target), 0o600)
    os.symlink(str(target), _page(tmp_path))
    with pytest.raises(host_channel.UnsafePage, match='symbolic link'):
        host_channel.hand_to_qemu(_page(tmp_path), 'qemu', 'qemu')
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_symlink_at_the_page_path_is_refused(tmp_path):
    target = tmp_path / 'etc-shadow'
    target.write_bytes(b'secret')
    os.symlink(str(target), _page(tmp_path))
    with pytest.raises(host_channel.UnsafePage, match='symbolic link'):
        host_channel.HostChannel(_page(tmp_path), VCPUS)
    assert target.read_bytes() == b'secret'         # not truncated


def test_a_dangling_symlink_creates_nothing(tmp_path):
    target = tmp_path / 'nowhere'
    os.symlink(str(target), _page(tmp_path))
    with pytest.raises(host_channel.UnsafePage, match='symbolic link'):
        host_channel.HostChannel(_page(tmp_path), VCPUS)
    assert not target.exists()


def test_a_symlink_fails_with_eloop_from_o_nofollow(tmp_path):
    # The refusal comes from the kernel, not from a check that races.
    os.symlink(str(tmp_path / 'x'), _page(tmp_path))
    with pytest.raises(OSError) as err:
        os.open(_page(tmp_path), os.O_RDWR | os.O_NOFOLLOW)
    assert err.value.errno == errno.ELOOP


@pytest.mark.parametrize('kind', ['fifo', 'directory'])
def test_anything_but_a_regular_file_is_refused(tmp_path, kind):
    path = _page(tmp_path)
    if kind == 'fifo':
        os.mkfifo(path)
    else:
        os.mkdir(path)
    with pytest.raises(host_channel.UnsafePage, match='regular file'):
        host_channel.HostChannel(path, VCPUS)


def test_a_hard_link_is_refused(tmp_path):
    other = tmp_path / 'other'
    other.write_bytes(b'\0' * 4096)
    os.link(str(other), _page(tmp_path))
    with pytest.raises(host_channel.UnsafePage, match='hard links'):
        host_channel.HostChannel(_page(tmp_path), VCPUS)


def test_a_file_another_user_created_is_refused(tmp_path):
    _need_root()
    path = _page(tmp_path)
    with open(path, 'wb') as handle:
        handle.write(b'\xa5' * 4096)
    os.chown(path, NOBODY, NOBODY)
    with pytest.raises(host_channel.UnsafePage, match='uid %d' % NOBODY):
        host_channel.HostChannel(path, VCPUS)
    assert os.stat(path).st_size == 4096            # not grown
    with open(path, 'rb') as handle:
        assert handle.read() == b'\xa5' * 4096
    with pytest.raises(host_channel.UnsafePage):
        host_channel.hand_to_qemu(path, host_channel.DEFAULT_QEMU_USER,
                                  host_channel.DEFAULT_QEMU_GROUP)
    assert os.stat(path).st_uid == NOBODY


def test_an_untrusted_owner_is_refused(tmp_path, monkeypatch):
    # The same check without root: this process is not trusted here.
    path = _page(tmp_path)
    host_channel.HostChannel(path, VCPUS).close()
    monkeypatch.setattr(host_channel, 'trusted_uids',
                        lambda owner=None: {os.geteuid() + 1})
    with pytest.raises(host_channel.UnsafePage, match='refusing it'):
        host_channel.HostChannel(path, VCPUS)


def test_trusted_owners_are_root_this_process_and_qemu():
    me = os.geteuid()
    assert host_channel.trusted_uids((123, 45)) == {0, me, 123}
    # Only the QEMU it is given: no user looked up behind the caller's
    # back (on RHEL, libvirt-qemu is nobody's QEMU).
    assert host_channel.trusted_uids(None) == {0, me}
    assert host_channel.trusted_uids((-1, 45)) == {0, me}


def test_qemus_user_and_group_are_the_ones_given():
    _need_root()
    nobody = pwd.getpwnam('nobody').pw_uid
    nogroup = grp.getgrgid(pwd.getpwnam('nobody').pw_gid)
    owner = (nobody, nogroup.gr_gid)
    assert host_channel.qemu_owner('nobody', nogroup.gr_name) == owner
    # As root: the page goes to QEMU's user and group, as given.
    assert host_channel.page_owner('nobody', nogroup.gr_name) == owner
    assert host_channel.group_problem('nobody', nogroup.gr_name) == ''
    assert host_channel.qemu_ids('ufo-no-such-user', nogroup.gr_name) == (
        None, nogroup.gr_gid)
    assert host_channel.qemu_ids('nobody', 'ufo-no-such-group') == (
        nobody, None)
    assert host_channel.qemu_owner('nobody', 'ufo-no-such-group') is None
    assert host_channel.page_owner('ufo-no-such-user', 'root') is None


def test_numeric_ids_are_taken_as_they_are():
    # Kolla-Ansible's QEMU (nova:nova in its container): no name on the
    # host, nothing looked up.
    with pytest.raises(KeyError):
        pwd.getpwuid(42436)
    assert host_channel.qemu_ids('42436', '42436') == (42436, 42436)
    assert host_channel.qemu_owner('42436', '0') == (42436, 0)
    # A name still works beside an id.
    nobody = pwd.getpwnam('nobody').pw_uid
    assert host_channel.qemu_ids('nobody', '42436') == (nobody, 42436)


@pytest.mark.parametrize('value', ['4294967295', '-1', '+5', ' 42',
                                   '\u0664\u0662', '12345678901', ''])
def test_what_is_not_a_plain_id_is_a_name(value):
    # (uid_t)-1 is no id; signs, blanks and other scripts' digits are not
    # decimal ids. None of them names an account here.
    assert host_channel.qemu_ids(value, value) == (None, None)


def test_a_page_goes_to_numeric_ids(tmp_path):
    _need_root()
    owner = host_channel.page_owner('42436', '42436')
    assert owner == (42436, 42436)
    ch = host_channel.HostChannel(_page(tmp_path), VCPUS, owner=owner)
    ch.close()
    st = os.stat(_page(tmp_path))
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (
        42436, 42436, host_channel.PAGE_MODE)
    # The page QEMU now owns is trusted again on the next start.
    host_channel.HostChannel(_page(tmp_path), VCPUS, owner=owner).unlink()
    assert not os.path.exists(_page(tmp_path))


def test_a_channel_trusts_and_unlinks_with_the_uids_it_is_given(tmp_path):
    _need_root()
    path = _page(tmp_path)
    host_channel.HostChannel(path, VCPUS).close()
    with pytest.raises(host_channel.UnsafePage, match='refusing it'):
        host_channel.HostChannel(path, VCPUS, trusted={os.geteuid() + 1})
    # QEMU (here: nobody) owns the page by now; the channel that trusts
    # it opens it and removes it, the default (root only) does not.
    os.chown(path, NOBODY, NOBODY)
    with pytest.raises(host_channel.UnsafePage, match='uid %d' % NOBODY):
        host_channel.remove_page(path)
    ch = host_channel.HostChannel(path, VCPUS, trusted={0, NOBODY})
    ch.unlink()
    assert not os.path.exists(path)


def test_remove_page_never_follows_or_removes_foreign_things(tmp_path):
    target = tmp_path / 'target'
    target.write_bytes(b'keep')
    link = tmp_path / 'link'
    link.symlink_to(target)
    with pytest.raises(host_channel.UnsafePage):
        host_channel.remove_page(str(link))
    assert link.is_symlink() and target.read_bytes() == b'keep'
    (tmp_path / 'dir').mkdir()
    with pytest.raises(host_channel.UnsafePage):
        host_channel.remove_page(str(tmp_path / 'dir'))
    with pytest.raises(host_channel.UnsafePage):
        host_channel.remove_page(str(target), trusted={os.geteuid() + 1})
    assert host_channel.remove_page(str(target))
    assert not host_channel.remove_page(str(target))


def test_unlink_removes_the_page(tmp_path):
    ch = host_channel.HostChannel(_page(tmp_path), VCPUS)
    ch.unlink()
    assert not os.path.exists(_page(tmp_path))
    ch.unlink()


QEMU_GID = 4242


def _as_nobody(groups, func):
    """Run ``func`` in a child as uid/gid nobody with ``groups``.

    QEMU is uid 12345, group QEMU_GID there. Returns the child's exit
    status (0: ``func`` returned).
    """
    _need_root()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups(groups)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            # QEMU's user and group as configured on a RHEL host.
            host_channel.qemu_owner = lambda user, group: {
                ('qemu', 'qemu'): (12345, QEMU_GID)}.get((user, group))
            func()
            code = 0
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            os._exit(code)
    return os.waitpid(pid, 0)[1]


@pytest.fixture
def sticky_dir():
    """A world-writable sticky directory nobody can reach, like /dev/shm."""
    import shutil
    import tempfile
    path = tempfile.mkdtemp(prefix='ufo-test-', dir='/dev/shm')
    os.chmod(path, 0o1777)
    yield path
    shutil.rmtree(path)


def test_as_a_plain_user_the_page_gets_qemus_group(sticky_dir):
    path = os.path.join(sticky_dir, 'ufo-page')

    def create():
        assert host_channel.group_problem('qemu', 'qemu') == ''
        owner = host_channel.page_owner('qemu', 'qemu')
        assert owner == (-1, QEMU_GID)
        host_channel.HostChannel(path, VCPUS, owner=owner).close()
        # Opened again by a restarted agent: still usable, unchanged.
        host_channel.HostChannel(path, VCPUS, owner=owner).close()

    assert _as_nobody([QEMU_GID], create) == 0
    st = os.stat(path)
    # The agent keeps the file; QEMU maps it through the group.
    assert (st.st_uid, st.st_gid) == (NOBODY, QEMU_GID)
    assert stat.S_IMODE(st.st_mode) == host_channel.PAGE_MODE


def test_as_a_plain_user_outside_qemus_group_the_agent_says_so(sticky_dir):
    def check():
        problem = host_channel.group_problem('qemu', 'qemu')
        assert 'not in group qemu, the group QEMU (qemu)' in problem, problem
        assert 'Add the user to group qemu' in problem

    assert _as_nobody([], check) == 0


def test_root_still_gives_the_page_to_qemu(monkeypatch):
    _need_root()
    monkeypatch.setattr(host_channel, 'qemu_owner', lambda *a: (12345, 77))
    assert host_channel.page_owner('qemu', 'qemu') == (12345, 77)
    assert host_channel.group_problem('qemu', 'qemu') == ''


def test_restore_opens_only_an_existing_page(tmp_path):
    path = _page(tmp_path)
    with pytest.raises(host_channel.ChannelError, match='does not exist'):
        host_channel.HostChannel(path, VCPUS, create=False)
    assert not os.path.exists(path)
    host_channel.HostChannel(path, VCPUS).close()
    channel = host_channel.HostChannel(path, VCPUS, create=False)
    assert not channel.created
    channel.close()
