"""A guest console command that gets no answer names itself first.

A CI run of the demo failed with only the demo's first output line in
the summary (CI keeps a failure's first 300 characters). These tests run
the real console on a pty whose other end never answers.
"""

import os

from ufo_tools import testguest


def _silent_console():
    main_fd, sub_fd = os.openpty()
    console = testguest.Console(os.ttyname(sub_fd))
    return console, main_fd, sub_fd


def test_a_timeout_names_the_command_on_its_first_line():
    console, main_fd, sub_fd = _silent_console()
    try:
        try:
            console.sh('killall ufo-workload', timeout=0.3)
        except TimeoutError as exc:
            first = str(exc).splitlines()[0]
        else:
            raise AssertionError('no timeout')
    finally:
        console.close()
        os.close(main_fd)
        os.close(sub_fd)
    assert first.startswith('killall ufo-workload')
    assert 'no answer on the guest console in 0 s' in first


def test_a_timeout_adds_what_the_guest_diagnosis_says():
    console, main_fd, sub_fd = _silent_console()
    console.diagnose = lambda: 'domain state (1, 1)'
    try:
        try:
            console.run('true', timeout=0.2)
        except TimeoutError as exc:
            text = str(exc)
        else:
            raise AssertionError('no timeout')
    finally:
        console.close()
        os.close(main_fd)
        os.close(sub_fd)
    assert text.splitlines()[-1] == 'domain state (1, 1)'
