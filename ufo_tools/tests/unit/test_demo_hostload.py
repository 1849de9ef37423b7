"""The demo's measure of the host's CPU outside the guests."""

import os

from ufo_tools.demo import hostload

STAT = ('cpu  100 5 50 1000 7 3 2 1 0 0\n'
        'cpu0 50 2 25 500 3 1 1 0 0 0\n'
        'intr 12345\n')


def test_busy_ticks_leave_idle_and_iowait_out():
    # user nice system irq softirq steal; not idle (1000) or iowait (7).
    assert hostload.host_busy_ticks(STAT) == 100 + 5 + 50 + 3 + 2 + 1


def test_process_ticks_survive_a_command_with_parentheses():
    text = ('4242 (qemu (x) y) S 1 4242 4242 0 -1 4194560 10 0 0 0 '
            '700 300 0 0 20 0 5 0 100 0 0\n')
    assert hostload.process_ticks(text) == 1000


def test_outside_share_takes_the_guests_away(monkeypatch):
    monkeypatch.setattr(os, 'sysconf', lambda name: 100)
    # 10 s on 2 CPUs: 2000 ticks in all. The host ran 1500, the guests
    # 1100 of them (a guest that went away counts nothing): 400 outside.
    got = hostload.outside_pct(0, 1500, {1: 0, 2: 100, 3: 5},
                               {1: 600, 2: 600, 4: 900}, 10.0, 2)
    assert got == 20.0


def test_the_meter_reads_proc(tmp_path):
    (tmp_path / 'stat').write_text(STAT)
    (tmp_path / '7').mkdir()
    (tmp_path / '7' / 'stat').write_text(
        '7 (qemu) S 1 7 7 0 -1 0 0 0 0 0 50 10 0 0 20 0 5 0 1 0 0\n')
    meter = hostload.Meter([7, 8], 1, proc=str(tmp_path))
    meter.start(0.0)
    (tmp_path / 'stat').write_text(STAT.replace('cpu  100', 'cpu  300'))
    (tmp_path / '7' / 'stat').write_text(
        '7 (qemu) S 1 7 7 0 -1 0 0 0 0 0 150 10 0 0 20 0 5 0 1 0 0\n')
    hz = os.sysconf('SC_CLK_TCK')
    # 200 busy ticks more, 100 of them the guest's: 100 ticks in 2 s.
    assert meter.stop(2.0) == 100.0 * 100 / hz / 2.0
