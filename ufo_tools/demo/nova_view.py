"""What the guests get without ufo-agent: the host as Nova leaves it.

Nova defines a shared-policy guest with ``<vcpu cpuset=...>`` set to
``[compute] cpu_shared_set`` and nothing else: every vCPU and the emulator
threads float over the whole shared set, and every vCPU stays online.
The demo's run without ufo-agent reads that from libvirt each second and
records it in ``/status``'s shape (:func:`status`), so that one
:class:`ufo_tools.demo.timeline.Timeline` records both runs alike.
"""

import dataclasses

from ufo_agent import cpuset

#: A guest's mode in the run without ufo-agent (the agent's are
#: ``active`` and ``idle``).
FLOATING = 'floating'


@dataclasses.dataclass(frozen=True)
class GuestPins:
    """One guest's live pins and vCPUs, as libvirt and the guest say."""

    vcpus: int
    online_vcpus: int
    vcpu_pins: frozenset        # of frozensets: each vCPU's CPUs
    emulator: frozenset

    def cpus(self):
        return frozenset().union(*self.vcpu_pins) if self.vcpu_pins \
            else frozenset()

    def as_nova_wrote(self, shared):
        """True if untouched: as Nova's ``<vcpu cpuset>`` pins a guest.

        Every vCPU and the emulator on the whole shared set, every vCPU
        online.
        """
        return (self.vcpu_pins == {frozenset(shared)} and
                self.emulator == frozenset(shared) and
                self.online_vcpus == self.vcpus)


def status(guests, shared, cores_of):
    """A ``/status``-shaped record of guests left as Nova pinned them.

    ``guests`` maps uuid to :class:`GuestPins`; ``shared`` is Nova's
    ``cpu_shared_set``; ``cores_of`` counts the physical cores of a CPU
    set. A guest's cores are those its vCPUs may run on; ``vcpu_cores``
    those every guest's vCPUs may run on together.
    """
    vms = []
    every = frozenset()
    for uuid, g in sorted(guests.items()):
        cpus = g.cpus()
        every |= cpus
        vms.append({'uuid': uuid, 'mode': FLOATING, 'signal': 'none',
                    'cores': cores_of(cpus),
                    'cpus': cpuset.format_cpuset(cpus),
                    'target_vcpus': g.vcpus,
                    'online_vcpus': g.online_vcpus, 'util': None,
                    'sf': None, 'vcpus': g.vcpus})
    return {
        'pools': {'managed_cores': cores_of(frozenset(shared)),
                  'vcpu_cores': cores_of(every), 'emulator_cores': 0,
                  'idle_cores': 0, 'overloaded': False},
        'vms': vms,
        'tick_seconds': 0.0,
    }
