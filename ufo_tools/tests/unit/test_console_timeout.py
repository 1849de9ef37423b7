"""A guest console command that gets no answer names itself first.

A CI run of the demo failed with only the demo's first output line in
the summary (CI keeps a failure's first 300 characters). These tests run
the real console on a pty whose other end never answers.
"""

import os

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
