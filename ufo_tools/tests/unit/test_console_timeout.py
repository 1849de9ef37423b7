"""A guest console command that gets no answer: named first, or resent.

CI keeps a failure's first 300 characters, so the command comes first.
These tests run the real console on a pty whose other end never
answers, or answers all but the first command.
"""

import os
import re
import select
import threading
import tty

import pytest

from ufo_tools import testguest


@pytest.fixture
def silent_console():
    main_fd, sub_fd = os.openpty()
    console = testguest.Console(os.ttyname(sub_fd))
    yield console
    console.close()
    os.close(main_fd)
    os.close(sub_fd)


def test_a_timeout_names_the_command_on_its_first_line(silent_console):
    with pytest.raises(TimeoutError) as caught:
        silent_console.sh('killall ufo-workload', timeout=0.3)
    first = str(caught.value).splitlines()[0]
    assert first.startswith('killall ufo-workload')
    assert 'no answer on the guest console in 0 s' in first


def test_a_timeout_adds_what_the_guest_diagnosis_says(silent_console):
    silent_console.diagnose = lambda: 'domain state (1, 1)'
    with pytest.raises(TimeoutError) as caught:
        silent_console.run('true', timeout=0.2)
    assert str(caught.value).splitlines()[-1] == 'domain state (1, 1)'


def _shell_that_loses_the_first_command(main_fd, stop):
    """A guest shell whose first command arrived cut: never answered.

    Says it is ready, then answers every later probe.
    """
    os.write(main_fd, b'UFO-INIT ready\n')
    seen = 0
    pending = b''
    while not stop.is_set():
        r, _, _ = select.select([main_fd], [], [], 0.05)
        if not r:
            continue
        pending += os.read(main_fd, 4096)
        *lines, pending = pending.split(b'\n')
        for line in lines:
            m = re.search(rb'echo (UFO-R\d+)-rc=', line)
            if not m:
                continue
            seen += 1
            if seen > 1:
                os.write(main_fd, m.group(1) + b'-rc=0\n')


def test_a_first_command_lost_at_boot_is_sent_again():
    main_fd, sub_fd = os.openpty()
    tty.setraw(main_fd)
    console = testguest.Console(os.ttyname(sub_fd))
    stop = threading.Event()
    shell = threading.Thread(target=_shell_that_loses_the_first_command,
                             args=(main_fd, stop), daemon=True)
    shell.start()
    try:
        testguest.wait_init(console, timeout=10.0, probe_timeout=0.5)
        assert console.lines()[-1] == 'UFO-R2-rc=0'
    finally:
        stop.set()
        shell.join(2)
        console.close()
        os.close(main_fd)
        os.close(sub_fd)


def test_closing_twice_leaves_a_file_that_took_its_fd_open():
    main_fd, sub_fd = os.openpty()
    console = testguest.Console(os.ttyname(sub_fd))
    fd = console._fd
    console.close()
    # The next file opened takes the lowest free number: the console's.
    other = os.open(os.devnull, os.O_RDONLY)
    try:
        assert other == fd
        console.close()
        os.fstat(other)
    finally:
        os.close(other)
        os.close(main_fd)
        os.close(sub_fd)
