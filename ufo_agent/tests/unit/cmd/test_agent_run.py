"""The run loop: signals, systemd notifications, reloads.

The loop runs in a child process (signals are delivered to a process,
and a signal the loop does not handle would end the test runner), over a
fake agent that records what happens to it.
"""

import json
import socket
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent('''
    import json, os, signal, sys
    from ufo_agent.cmd import agent as cmd
    from ufo_agent.service import sdnotify

    events = []
    send = dict(arg.split('=') for arg in sys.argv[2:])

    class FakeAgent:
        guests = {'a': None, 'b': None}
        snapshot = {}
        ticks = 0
        tick_seconds = 0.0
        failed_ticks = 0

        def start(self):
            events.append('start')

        def tick(self):
            self.ticks += 1
            events.append('tick %d' % self.ticks)
            if send.get(str(self.ticks), '').startswith('SIG'):
                os.kill(os.getpid(), getattr(signal, send[str(self.ticks)]))

        def stop(self):
            events.append('stop')
            return []

    def reload(agent):
        events.append('reload')

    agent = FakeAgent()

    def check():
        # 'refuse' after a tick: the next check says why not to go on.
        return send.get(str(agent.ticks)) == 'refuse' and 'CPUs changed'

    notifier = sdnotify.Notifier({'NOTIFY_SOCKET': sys.argv[1]})
    rc = cmd.run(agent, 0.01, 6, notifier=notifier, reload=reload,
                 checks=(check,))
    print(json.dumps({'rc': rc, 'events': events}))
''')


@pytest.fixture
def run_loop(tmp_path):
    """run(..., max_ticks=6) in a child; signals sent at given ticks."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / 'notify')
    listener.bind(path)
    listener.setblocking(False)

    def run(**signals):
        proc = subprocess.run(
            [sys.executable, '-c', SCRIPT, path] +
            ['%s=%s' % (tick[1:], name) for tick, name in signals.items()],
            capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, (proc.returncode, proc.stderr)
        run.stderr = proc.stderr
        notes = []
        while True:
            try:
                notes.append(listener.recv(4096).decode())
            except BlockingIOError:
                break
        return json.loads(proc.stdout), notes

    yield run
    listener.close()


def test_sighup_reloads_before_the_next_tick_and_keeps_the_guests(run_loop):
    result, _ = run_loop(t2='SIGHUP', t4='SIGHUP')
    assert result == {'rc': 0, 'events': [
        'start', 'tick 1', 'tick 2', 'reload', 'tick 3', 'tick 4', 'reload',
        'tick 5', 'tick 6', 'stop']}


def test_sigterm_stops_after_the_tick_and_releases(run_loop):
    result, notes = run_loop(t3='SIGTERM')
    assert result['events'] == ['start', 'tick 1', 'tick 2', 'tick 3',
                                'stop']
    assert notes == ['READY=1\nSTATUS=managing 2 guests', 'WATCHDOG=1',
                     'WATCHDOG=1', 'WATCHDOG=1',
                     'STOPPING=1\nSTATUS=giving every guest back']


def test_systemd_hears_ready_a_watchdog_per_healthy_tick_and_stopping(
        run_loop):
    result, notes = run_loop()
    assert result['rc'] == 0
    assert notes[0].startswith('READY=1') and \
        notes[-1].startswith('STOPPING=1')
    assert notes[1:-1] == ['WATCHDOG=1'] * 6


def test_a_failed_check_gives_every_guest_back_and_stops(run_loop):
    result, notes = run_loop(t2='refuse')
    from ufo_agent.cmd import agent as cmd
    assert result == {'rc': cmd.EXIT_CONFIG,
                      'events': ['start', 'tick 1', 'tick 2', 'stop']}
    assert notes[-1] == 'STOPPING=1\nSTATUS=giving every guest back'
    assert 'CPUs changed: giving every guest back and stopping' \
        in run_loop.stderr
