"""The host area is written from two threads: targets and the heartbeat.

The agent loop sends targets while the heartbeat thread beats. Both
write the host area under its seqlock: two writers at once would leave
the sequence odd (the guest then sees the host forever mid-write) or let
the guest read a torn area between the two.
"""

import threading
import time

from ufo_agent.channel import host_channel
from ufo_agent.channel import layout


def _host_area(ch):
    data = ch.read_raw()[layout.HOST_OFFSET:layout.HOST_OFFSET +
                         layout.HOST_SIZE]
    return layout.unpack(layout.HOST_FIELDS, layout.HOST_STRUCT, data)


def test_beat_and_set_target_never_write_at_the_same_time(tmp_path):
    ch = host_channel.HostChannel(str(tmp_path / 'page'), 4)
    ch.initialize()
    inside, overlaps = [0], []
    real_write = ch._write_host

    def write():
        # A writer that takes its time: another one entering now would
        # interleave its seqlock steps with this one's.
        inside[0] += 1
        if inside[0] > 1:
            overlaps.append(inside[0])
        time.sleep(0.001)
        real_write()
        inside[0] -= 1

    ch._write_host = write
    stop = threading.Event()

    def beat():
        while not stop.is_set():
            ch.beat()

    beater = threading.Thread(target=beat)
    beater.start()
    try:
        for i in range(100):
            seq = ch.set_target(1 + i % 4)
    finally:
        stop.set()
        beater.join(5)
    assert overlaps == []
    area = _host_area(ch)
    assert area['seq'] % 2 == 0
    assert area['target_seq'] == seq == ch.target_seq
    assert area['target_vcpus'] == ch.target
    ch.close()


def test_a_beat_after_close_does_nothing(tmp_path):
    ch = host_channel.HostChannel(str(tmp_path / 'page'), 2)
    ch.initialize()
    ch.close()
    ch.beat()               # the heartbeat thread may still hold it
