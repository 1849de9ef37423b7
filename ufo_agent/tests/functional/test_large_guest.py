"""A large guest shrinks in bounded steps, each well inside the timeout.

Alone on the host (no other guest competes with its ten vCPUs under TCG),
the agent writes its targets into the guest's page: they must step down
by at most ``[agent] max_vcpu_step``, and the guest answers every step.
"""

import os
import signal
import time

from ufo_agent.channel import layout
from ufo_tools.e2e import AgentProcess
from ufo_tools.e2e import nova_guest
from ufo_tools.e2e import wait_guest_online


VCPUS = 10


def _host_target(page):
    """The target the agent last wrote into a page's host area."""
    with open(page, 'rb') as handle:
        data = handle.read(layout.HOST_STRUCT.size)
    area = layout.unpack(layout.HOST_FIELDS, layout.HOST_STRUCT, data)
    return area['target_vcpus'] if area['magic'] == layout.HOST_MAGIC \
        else None


def test_a_large_guest_shrinks_in_bounded_steps(guest_artifacts, tmp_path):
    # Parking a 64-vCPU guest was 63 remove_cpu() calls in one step, past
    # the acknowledgement timeout: the host rolled back every tick.
    # Ten vCPUs: three bounded steps down to two. Sixteen took minutes
    # to boot and to answer its console on CI's two CPUs.
    with nova_guest(vcpus=VCPUS, name='trust-large', memory_mib=384) as big:
        uuid = big.dom.UUIDString()
        page = '/dev/shm/ufo-' + uuid
        # A remove_cpu() of a large TCG guest on two host CPUs takes up
        # to about a second under load: three of them fit in ack_timeout's
        # maximum, 4 s, with room; all eight in one step would not.
        agent = AgentProcess(tmp_path, agent__max_vcpu_step='3',
                             agent__ack_timeout='4').start()
        try:
            targets, deadline = [], time.monotonic() + 240
            while time.monotonic() < deadline and agent.proc.poll() is None:
                target = _host_target(page) if os.path.exists(page) \
                    else None
                if target and (not targets or targets[-1] != target):
                    targets.append(target)
                if targets and targets[-1] <= 2 and \
                        len(big.online_cpus()) == targets[-1]:
                    break
                time.sleep(0.05)
            assert targets and targets[-1] <= 2, targets
            steps = [x - y for x, y in zip([VCPUS] + targets, targets)]
            assert max(steps) <= 3, targets
            assert '%s: no acknowledgement' % uuid not in agent.log_text()
            assert agent.stop(signal.SIGTERM) == 0
            assert wait_guest_online(big, set(range(VCPUS))) == \
                set(range(VCPUS))
        finally:
            agent.stop(signal.SIGKILL)
