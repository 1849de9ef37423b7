"""A test guest boot that stalls is started again once; a slow one is not.

``boot_state`` is tested on console lines; ``GuestBoot`` with consoles
that print scripted lines at set times after their boot starts.
"""

import errno
import logging
import os
import re
import time

import pytest

from ufo_tools import testguest

# The first kernel stall line of a boot that hung in CI.
RCU_STALL = ('[   44.395606] rcu: INFO: rcu_preempt detected stalls on '
             'CPUs/tasks:')
HUNG_TASK = ('[  242.601742] INFO: task kworker/0:1:17 blocked for more '
             'than 120 seconds.')
TIMER = ("[   65.412995] rcu: rcu_preempt kthread timer wakeup didn't "
         "happen for 5253 jiffies! g-1139 f0x0 RCU_GP_WAIT_FQS(5)")
BOOTS = [(0.05, 'UFO-INIT kernel=6.1.0-57-cloud-amd64 cpus=2'),
         (0.1, 'UFO-INIT module=loaded'), (0.15, 'UFO-INIT ready')]


@pytest.mark.parametrize('line', [RCU_STALL, HUNG_TASK, TIMER],
                         ids=['rcu-stall', 'hung-task', 'timer'])
def test_a_kernel_stall_line_is_a_stalled_boot_at_once(line):
    assert testguest.boot_state([(1.0, 'x'), (2.0, line)], 0.0, 2.0,
                                deadline=100.0, quiet=10.0) == (
        testguest.STALLED, 2.0, 'kernel stall: ' + line.strip())


def test_a_silent_boot_is_stalled_from_its_deadline():
    assert testguest.boot_state([], 0.0, 59.0, 60.0, 20.0)[0] == \
        testguest.BOOTING
    assert testguest.boot_state([], 0.0, 61.0, 60.0, 20.0) == (
        testguest.STALLED, 60.0, 'no UFO-INIT line in 60 s')


def test_a_boot_still_printing_past_its_deadline_is_booting():
    lines = [(float(t), 'kernel line') for t in range(0, 75, 5)]
    assert testguest.boot_state(lines, 0.0, 80.0, 60.0, 20.0)[0] == \
        testguest.BOOTING
    # Quiet for 20 s since its last line (70 s): stalled from 90 s.
    assert testguest.boot_state(lines, 0.0, 95.0, 60.0, 20.0) == (
        testguest.STALLED, 90.0, 'no UFO-INIT line in 90 s')


def test_a_ready_line_wins_over_an_earlier_stall():
    lines = [(1.0, RCU_STALL), (2.0, 'UFO-INIT ready')]
    assert testguest.boot_state(lines, 0.0, 300.0, 60.0, 20.0) == (
        testguest.READY, 2.0, 'UFO-INIT ready')


class ScriptedConsole:
    """A guest console printing (seconds after start, line) pairs."""

    def __init__(self, script, gone_at=None):
        self.began = time.monotonic()
        self.script = script
        # From then on writes fail as on a pty whose QEMU exited.
        self.gone_at = gone_at
        self.closed = False
        self.written = []

    def timed_lines(self, start=0):
        now = time.monotonic()
        return [(self.began + at, line) for at, line in self.script
                if self.began + at <= now][start:]

    def lines(self, start=0):
        return [line for _, line in self.timed_lines(start)]

    @property
    def position(self):
        return len(self.timed_lines())

    def wait_for(self, pattern, timeout=60.0, start=0):
        deadline = time.monotonic() + timeout
        while True:
            for i, line in enumerate(self.lines()[start:], start):
                m = re.search(pattern, line)
                if m:
                    return i, m
            if time.monotonic() >= deadline:
                raise TimeoutError('no %r' % pattern)
            time.sleep(0.01)

    def write(self, text):
        if self.gone_at is not None and \
                time.monotonic() >= self.began + self.gone_at:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        self.written.append(text)

    def run(self, command, timeout=60.0):
        # The probe after boot: a shell that answers.
        assert 'UFO-INIT ready' in self.lines()
        return 0, []

    def close(self):
        self.closed = True


class Domain:
    """Starts a new scripted console per boot; counts starts and stops."""

    def __init__(self, *scripts):
        self.scripts = list(scripts)
        self.consoles = []
        self.stops = 0

    def start(self):
        script = self.scripts.pop(0)
        gone_at = None
        if isinstance(script, tuple):
            script, gone_at = script
        self.consoles.append(ScriptedConsole(script, gone_at))
        return self.consoles[-1]

    def stop(self):
        self.consoles[-1].close()
        self.stops += 1


def boot(domain, timeout=2.0, quiet=0.3):
    """A guest boot over ``domain``: its boot deadline is 1 s."""
    return testguest.GuestBoot(
        'guest-a', domain.start, domain.stop, timeout, retries=1,
        diagnose=lambda: 'domain state (1, 1)', quiet=quiet,
        probe_timeout=0.2, poke_every=0.5)


def test_a_kernel_stall_boots_again_at_once_and_stays_in_the_log(caplog):
    domain = Domain([(0.05, 'Linux version 6.1'), (0.1, RCU_STALL)], BOOTS)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger='ufo_tools.testguest'):
        console = boot(domain).begin().wait()
    took = time.monotonic() - started
    assert console is domain.consoles[1]
    assert domain.stops == 1 and domain.consoles[0].closed
    # On the stall line, not at the 1 s boot deadline.
    assert took < 0.8, took
    [record] = caplog.records
    assert record.getMessage().splitlines() == [
        'boot 1 of guest-a after 0 s: kernel stall: ' + RCU_STALL +
        '; console tail:', 'Linux version 6.1', RCU_STALL,
        'domain state (1, 1)']


def test_a_silent_boot_boots_again_at_its_deadline():
    domain = Domain([], BOOTS)
    started = time.monotonic()
    boot(domain).begin().wait()
    took = time.monotonic() - started
    assert len(domain.consoles) == 2 and domain.stops == 1
    assert 1.0 <= took < 1.8, took


def test_a_guest_that_stalls_twice_fails_naming_both_boots():
    domain = Domain([(0.1, RCU_STALL)], [(0.05, 'Linux'), (0.1, HUNG_TASK)])
    started = time.monotonic()
    with pytest.raises(TimeoutError) as caught:
        boot(domain).begin().wait()
    took = time.monotonic() - started
    # No third boot; the second had the rest of the 2 s.
    assert len(domain.consoles) == 2 and domain.stops == 1
    assert 2.0 <= took < 2.6, took
    text = str(caught.value)
    assert text.splitlines()[0] == \
        'test guest guest-a did not boot in 2 s (boots: 2)'
    assert 'boot 1 of guest-a after 0 s: kernel stall: ' + RCU_STALL in text
    assert 'boot 2 of guest-a after 2 s: kernel stall: ' + HUNG_TASK in text
    assert text.count('domain state (1, 1)') == 2


GONE = '%s (%s)' % (testguest.CONSOLE_GONE, os.strerror(errno.EIO))


def test_a_boot_whose_qemu_exits_boots_again(caplog):
    # The poke's write to the pty of a QEMU that exited fails with EIO.
    domain = Domain(([(0.05, 'Linux version 6.1')], 0.1), BOOTS)
    with caplog.at_level(logging.WARNING, logger='ufo_tools.testguest'):
        # A 2 s boot deadline: the poke finds the console gone first.
        console = boot(domain, timeout=4.0).begin().wait()
    assert console is domain.consoles[1] and domain.stops == 1
    [record] = caplog.records
    assert record.getMessage().splitlines()[0].endswith(
        GONE + '; console tail:')


def test_a_guest_whose_qemu_exits_twice_fails_naming_it():
    domain = Domain(([], 0.1), ([], 0.1))
    with pytest.raises(TimeoutError) as caught:
        boot(domain, timeout=4.0).begin().wait()
    assert len(domain.consoles) == 2
    first = str(caught.value).splitlines()[0]
    assert first == 'test guest guest-a did not boot: %s (boots: 2)' % GONE


def test_a_slow_boot_still_printing_is_not_booted_again():
    # Kernel lines every 0.1 s up to 1.6 s, past the 1 s boot deadline.
    slow = [(0.1 * i, 'kernel line %d' % i) for i in range(1, 17)]
    domain = Domain(slow + [(1.7, 'UFO-INIT ready')])
    console = boot(domain).begin().wait()
    assert domain.consoles == [console] and domain.stops == 0


def test_a_boot_stalled_after_its_deadline_is_not_booted_again():
    # Printing until 1.2 s, then silent: stalled from 1.5 s, past the
    # 1 s boot deadline; another boot would have less than its own.
    domain = Domain([(0.1 * i, 'kernel line') for i in range(1, 13)])
    with pytest.raises(TimeoutError) as caught:
        boot(domain).begin().wait()
    assert len(domain.consoles) == 1
    assert '(boots: 1)' in str(caught.value).splitlines()[0]


def test_without_retries_a_stall_fails_at_the_timeout_as_before():
    domain = Domain([(0.1, RCU_STALL)])
    guest = testguest.GuestBoot('guest-a', domain.start, domain.stop, 1.0,
                                retries=0, quiet=0.3, probe_timeout=0.2)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        guest.begin().wait()
    # At the timeout, not another boot deadline (1 s) later.
    assert 1.0 <= time.monotonic() - started < 1.9
    assert len(domain.consoles) == 1


def test_retries_default_to_the_environment(monkeypatch):
    monkeypatch.setenv('UFO_GUEST_BOOT_RETRIES', '2')
    guest = testguest.GuestBoot('guest-a', None, None, 300.0)
    assert guest.retries == 2 and guest.deadline == 100.0
    monkeypatch.delenv('UFO_GUEST_BOOT_RETRIES')
    guest = testguest.GuestBoot('guest-a', None, None, 300.0)
    assert guest.retries == 1 and guest.deadline == 150.0
