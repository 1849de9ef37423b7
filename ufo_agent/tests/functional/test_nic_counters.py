"""A real guest's NIC counters, as the libvirt driver reads them.

One test guest (TCG here, KVM where it works) with a virtio NIC on a tap
of its own, as Nova writes it for several os-vif plugins (``<interface
type='ethernet'>``). Traffic goes one way at a time and gets no answer:
frames the host writes to the tap for the guest's MAC with an ethertype
nobody speaks, then echo requests the guest sends to a neighbour whose
MAC nobody has. The driver's counters, and the sampler's rates from
them, must grow on the side the traffic went. Nothing leaves the tap:
the host's side has no address, the guest a link-local one.
"""

import os
import re
import socket
import struct
import time

import pytest

from ufo_agent.driver.libvirt import driver as libvirt_driver
from ufo_agent.service import sampler as sampler_mod
from ufo_tools.e2e import host_online_cpus
from ufo_tools import testguest

PACKETS = 1000
BATCH = 50
ETHERTYPE = 0x88b5          # IEEE 802 local experimental: nobody's
NEIGHBOUR_MAC = '02:00:00:00:77:02'
GUEST_ADDRESS = '169.254.77.1/24'
NEIGHBOUR = '169.254.77.2'
TIMEOUT = 60.0


def _mac(text):
    return bytes.fromhex(text.replace(':', ''))


@pytest.fixture(scope='module')
def nic_guest(guest_artifacts):
    """(guest, its uuid, a LibvirtDriver managing it), eth0 up."""
    guest = testguest.TestGuest(vcpus=1, channel=False, nic=True,
                                cmdline='ufo.noload=1')
    guest.start()
    driver = None
    try:
        rc, out = guest.console.sh(
            'ip link set eth0 up && ip addr add %s dev eth0 && '
            'arp -i eth0 -s %s %s'
            % (GUEST_ADDRESS, NEIGHBOUR, NEIGHBOUR_MAC))
        assert rc == 0, out
        driver = libvirt_driver.LibvirtDriver(
            managed_cpus=frozenset(host_online_cpus()),
            manage_non_nova=True, attach_channels=False)
        uuid = guest.dom.UUIDString()
        assert uuid in [g.uuid for g in driver.guests()]
        yield guest, uuid, driver
    finally:
        if driver is not None:
            driver.close()
        guest.close()
        print('console log: %s' % guest.log_path)
    # The tap went with the guest's QEMU.
    assert not os.path.exists('/sys/class/net/' + guest.tap)


def _traffic(driver, uuid, tap, since):
    """(observation, packets in, packets out) of ``tap`` since ``since``."""
    obs = driver.observe(uuid)
    assert obs.nics is not None and set(obs.nics) == {tap}, obs.nics
    now, then = obs.nics[tap], since.nics[tap]
    return (obs, now.packets_in - then.packets_in,
            now.packets_out - then.packets_out)


def _rates(uuid, first, last):
    """The sampler's VmSample from two observations."""
    sampler = sampler_mod.Sampler()
    assert sampler.rates(uuid, first) is None
    return sampler.rates(uuid, last).sample


def test_frames_the_host_sends_count_as_packets_into_the_guest(nic_guest):
    guest, uuid, driver = nic_guest
    first = driver.observe(uuid)
    frame = (_mac(guest.mac) + _mac(NEIGHBOUR_MAC) +
             struct.pack('!H', ETHERTYPE) + bytes(46))
    sent = 0
    deadline = time.monotonic() + TIMEOUT
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
        sock.bind((guest.tap, 0))
        # In batches until the guest got as many (QEMU stops reading the
        # tap while the guest's receive ring is full, and the tap drops),
        # three times as many at most.
        while True:
            if sent < 3 * PACKETS:
                for _ in range(BATCH):
                    sock.send(frame)
                sent += BATCH
            obs, into, out = _traffic(driver, uuid, guest.tap, first)
            if into >= PACKETS:
                break
            assert time.monotonic() < deadline, (
                '%d frames sent to the guest in %.0f s: %d packets in, %d '
                'out' % (sent, TIMEOUT, into, out))
            time.sleep(0.02)
    print('%d frames sent: %d packets in, %d out' % (sent, into, out))
    assert out < PACKETS // 10
    sample = _rates(uuid, first, obs)
    assert sample.packets_in == pytest.approx(into / (obs.time - first.time))
    assert sample.packets_out < sample.packets_in / 10
    assert sample.bytes_in > sample.bytes_out


def test_packets_the_guest_sends_count_as_packets_out_of_it(nic_guest):
    guest, uuid, driver = nic_guest
    first = driver.observe(uuid)
    _, lines = guest.console.sh('ping -q -c %d -i 0.002 -W 1 %s'
                                % (PACKETS, NEIGHBOUR), timeout=TIMEOUT)
    summary = re.search(r'(\d+) packets transmitted, (\d+) packets received',
                        '\n'.join(lines))
    assert summary and summary.groups() == (str(PACKETS), '0'), lines
    deadline = time.monotonic() + TIMEOUT
    while True:
        obs, into, out = _traffic(driver, uuid, guest.tap, first)
        if out >= PACKETS:
            break
        assert time.monotonic() < deadline, (
            'the guest sent %d echo requests: %d packets in, %d out'
            % (PACKETS, into, out))
        time.sleep(0.2)
    print('%d echo requests sent: %d packets in, %d out'
          % (PACKETS, into, out))
    assert into < PACKETS // 10
    sample = _rates(uuid, first, obs)
    assert sample.packets_out == pytest.approx(out / (obs.time - first.time))
    assert sample.packets_in < sample.packets_out / 10
    assert sample.bytes_out > sample.bytes_in
