"""A guest the agent cannot trust: it never acknowledges.

A guest booted without the module gets its channel like any other; the
test then writes a well-formed guest area into that guest's page that
never acknowledges a target (a broken or hostile module). Beside it, two
guests with the real module must keep their ticks as short as ever: the
agent waits for nobody longer than ``[agent] ack_wait``.
"""

import mmap
import os
import signal
import threading
import time

import pytest

from ufo_agent.channel import layout
from ufo_tools.e2e import AgentProcess
from ufo_tools.e2e import nova_guest
from ufo_tools.e2e import vm_status


class MuteModule(threading.Thread):
    """A guest area that looks alive and never acknowledges a target."""

    def __init__(self, path, vcpus):
        super().__init__(daemon=True)
        self.path = path
        self.vcpus = vcpus
        self.stop = threading.Event()

    def area(self, count):
        now = time.monotonic_ns()
        values = dict(
            magic=layout.GUEST_MAGIC, abi_version=layout.ABI_VERSION,
            seq=2 * count, flags=layout.GUEST_FLAG_HOST_VALID,
            ack_target_seq=0, applied_target=0, online_vcpus=self.vcpus,
            present_vcpus=self.vcpus, sample_count=count, timestamp_ns=now,
            interval_ns=10 ** 9, util=100, steal=0, ctxsw_per_sec=50,
            own_ctxsw_per_sec=0,
            online_mask=[(1 << self.vcpus) - 1] + [0] * (
                layout.MASK_WORDS - 1),
            host_errors=0, watchdog_fires=0, sched_in_per_sec=0)
        return layout.pack(layout.GUEST_FIELDS, layout.GUEST_STRUCT, values)

    def run(self):
        fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW)
        try:
            mm = mmap.mmap(fd, layout.PAGE_SIZE)
        finally:
            os.close(fd)
        count = 1
        try:
            while not self.stop.wait(0.3):
                data = self.area(count)
                mm[layout.GUEST_OFFSET:layout.GUEST_OFFSET + len(data)] = \
                    data
                count += 1
        finally:
            mm.close()


@pytest.fixture(scope='module')
def guests(guest_artifacts):
    with nova_guest(name='trust-a') as a, nova_guest(name='trust-b') as b, \
            nova_guest(name='trust-mute', cmdline='ufo.noload=1') as mute:
        yield a, b, mute


def test_a_guest_that_never_acknowledges_stalls_nobody(guests, tmp_path):
    a, b, mute = guests
    uuids = {g.dom.UUIDString(): g for g in (a, b, mute)}
    mute_uuid = mute.dom.UUIDString()
    agent = AgentProcess(tmp_path, agent__ack_timeout='2',
                         agent__ack_wait='0.3').start()
    forger = None
    try:
        agent.wait(lambda s: all(
            (vm_status(s, u) or {}).get('channel') for u in uuids),
            what='every guest adopted')
        page = '/dev/shm/ufo-' + mute_uuid
        agent.wait(lambda s: os.path.exists(page), what='the mute page')
        forger = MuteModule(page, 2)
        forger.start()
        agent.wait(lambda s: vm_status(s, mute_uuid)['channel'] ==
                   'host-only', timeout=60,
                   what='the mute guest to fall back to host-only')
        # Watch 20 ticks: none may wait for the mute guest.
        ticks, longest, seen = None, 0.0, set()
        deadline = time.monotonic() + 60
        while len(seen) < 20 and time.monotonic() < deadline:
            status = agent.poll()
            if status and status['ticks'] != ticks:
                ticks = status['ticks']
                seen.add(ticks)
                longest = max(longest, status['tick_seconds'])
                for uuid in (a.dom.UUIDString(), b.dom.UUIDString()):
                    vm = vm_status(status, uuid)
                    assert vm['channel'] == 'proven', vm
                assert vm_status(status, mute_uuid)['online_vcpus'] == 2
            time.sleep(0.2)
        assert len(seen) >= 20
        # Before: every tick waited ack_timeout (2 s) for the mute guest.
        assert longest < 1.0, longest
        log = agent.log_text()
        assert 'no acknowledgement' in log and 'host-only for 30 s' in log
        assert log.count('host-only for') == 1     # backoff: asked once
    finally:
        if forger is not None:
            forger.stop.set()
            forger.join(5)
        agent.stop(signal.SIGTERM)
