"""Helpers of the ufo-agent end-to-end tests (see ufo_agent.demo.harness).

The demo and the tests share the harness: a real ufo-agent process and
test guests with Nova's metadata.
"""

import time

from ufo_agent.demo import harness

AgentProcess = harness.AgentProcess
free_port = harness.free_port
host_online_cpus = harness.host_online_cpus
live_pins = harness.live_pins
vm_status = harness.vm_status
set_load = harness.set_load

VCPUS = 2
WATCHDOG_MS = 3000


def nova_guest(vcpus=VCPUS, **kwargs):
    return harness.nova_guest(vcpus=vcpus, **kwargs)


def wait_guest_online(guest, want, timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        online = guest.online_cpus()
        if online == want or time.monotonic() > deadline:
            return online
        time.sleep(0.5)
