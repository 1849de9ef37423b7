"""Channel pages in /dev/shm with the kernel's sticky-directory protections.

systemd sets ``fs.protected_regular`` and ``fs.protected_symlinks`` on
most distributions. In a world-writable sticky directory such as /dev/shm
they refuse ``O_CREAT`` on a file of another user (QEMU's page) and
following another user's symbolic link, to root as well. The tests set
both to 1 for their duration (the old values come back afterwards) and run
the real ufo-agent, as root, against a real guest. Tests run in file order
on one guest.
"""

import errno
import os
import pwd
import signal
import stat

import pytest

from ufo_tools.e2e import AgentProcess
from ufo_tools.e2e import nova_guest
from ufo_tools.e2e import vm_status

SYSCTLS = ('fs/protected_regular', 'fs/protected_symlinks')
NOBODY = 65534


@pytest.fixture(scope='module')
def protected():
    """Both protections on; their old values back afterwards."""
    old = {}
    try:
        for name in SYSCTLS:
            path = os.path.join('/proc/sys', name)
            with open(path) as handle:
                old[name] = handle.read().strip()
            try:
                with open(path, 'w') as handle:
                    handle.write('1\n')
            except OSError as exc:
                pytest.fail('cannot set %s: %s (is /proc/sys read-only '
                            'here?); these tests need it' % (path, exc))
        yield
    finally:
        for name, value in old.items():
            with open(os.path.join('/proc/sys', name), 'w') as handle:
                handle.write(value + '\n')


@pytest.fixture(scope='module')
def guest(guest_artifacts, protected):
    with nova_guest(cmdline='ufo.rate=300 ufo.svc_us=500 ufo.workers=2') \
            as g:
        yield g


def _page(guest):
    return '/dev/shm/ufo-' + guest.dom.UUIDString()


def _stop(agent):
    if agent.proc is not None and agent.proc.poll() is None:
        assert agent.stop(signal.SIGTERM) == 0


def test_a_file_planted_at_the_page_name_is_refused(guest, tmp_path):
    """Another user's file at the predictable name: no channel, untouched."""
    uuid = guest.dom.UUIDString()
    page = _page(guest)
    fd = os.open(page, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                 0o666)
    try:
        os.write(fd, b'planted')
        os.fchown(fd, NOBODY, NOBODY)
    finally:
        os.close(fd)
    agent = AgentProcess(tmp_path).start()
    try:
        status = agent.wait(lambda s: (vm_status(s, uuid) or {}).get(
            'reason') == 'no guest channel', what='the guest managed')
        assert vm_status(status, uuid)['signal'] == 'host-only'
        log = agent.log_text()
        assert 'No channel for %s' % uuid in log
        assert 'belongs to uid %d, not to root or QEMU' % NOBODY in log
        st = os.lstat(page)
        assert st.st_uid == NOBODY and st.st_size == len(b'planted')
    finally:
        _stop(agent)
        os.unlink(page)


def test_a_restarted_agent_keeps_the_guest_channel(guest, tmp_path):
    uuid = guest.dom.UUIDString()
    page = _page(guest)
    (tmp_path / 'first').mkdir()
    (tmp_path / 'again').mkdir()
    first = AgentProcess(tmp_path / 'first').start()
    try:
        first.wait(lambda s: (vm_status(s, uuid) or {}).get('signal') ==
                   'guest', what='guest mode')
    finally:
        _stop(first)
    # The page is QEMU's, in the sticky, world-writable /dev/shm: the
    # situation in which protected_regular refuses O_CREAT, even to root.
    shm = os.stat('/dev/shm')
    assert shm.st_mode & stat.S_ISVTX and shm.st_mode & stat.S_IWOTH
    st = os.lstat(page)
    assert stat.S_ISREG(st.st_mode)
    assert st.st_uid == pwd.getpwnam('libvirt-qemu').pw_uid
    assert stat.S_IMODE(st.st_mode) == 0o660
    with pytest.raises(OSError) as refused:
        os.close(os.open(page, os.O_RDWR | os.O_CREAT))
    assert refused.value.errno == errno.EACCES
    # The next agent opens it as it is and the guest's channel comes back.
    again = AgentProcess(tmp_path / 'again').start()
    try:
        again.wait(lambda s: (vm_status(s, uuid) or {}).get('signal') ==
                   'guest', what='guest mode after the restart')
        log = again.log_text()
        assert 'No channel' not in log and 'Attached UFO channel' not in log
        assert 'Traceback' not in log
        assert os.lstat(page).st_ino == st.st_ino
    finally:
        _stop(again)
