"""What the agent loop needs from a hypervisor, and nothing more.

The libvirt driver implements this for real hosts; a simulator can
implement it for what-if studies. All methods are called from the agent
loop's thread, once per tick at most, except :meth:`heartbeat`, which the
heartbeat thread calls at any time. None may block for long: a method
that cannot finish (a guest gone, libvirt restarting, a call past its
deadline) raises :class:`DriverError` and the loop carries on with the
other guests.

Counters are cumulative (like ``/proc``); the loop turns them into rates.
"""

import abc
import dataclasses
import enum
import typing

from ufo_agent.channel import report
from ufo_agent import frozen


class DriverError(Exception):
    """An operation on one guest or on the hypervisor failed."""


class GuestBusy(DriverError):
    """Nothing was done: an earlier call on the guest has not returned.

    The guest's threads are where they were before the operation.
    """


class GuestEvent(str, enum.Enum):
    """Lifecycle changes the loop must react to."""

    STARTED = 'started'        # booted, migrated in, restored
    REBOOTED = 'rebooted'      # guest reset: its kernel starts over
    PAUSED = 'paused'          # its vCPUs stopped; its QEMU lives on
    RESUMED = 'resumed'        # running again after PAUSED
    STOPPED = 'stopped'        # shut off, crashed, migrated out
    UNDEFINED = 'undefined'    # gone for good


@dataclasses.dataclass(frozen=True)
class HostCpus:
    """The host's CPUs.

    SMT sibling groups, the NUMA node of each CPU, and which are online.
    ``little`` holds the CPUs of the host's smaller cores where it has
    two classes (Intel hybrid E-cores, or a lower ``cpu_capacity``);
    empty on a host whose cores are all alike.
    """

    siblings: tuple
    numa_of_cpu: dict
    online: frozenset
    little: frozenset = frozenset()


@dataclasses.dataclass(frozen=True)
class Guest:
    """A running guest the agent manages.

    ``vcpus`` is the flavor's vCPU count. ``restore_vcpu_cpus`` and
    ``restore_emulator_cpus`` are every CPU its vCPU threads, and its other
    threads, may run on when the agent lets go; ``restore_vcpus`` maps
    each vCPU to its own CPUs when the definition pins vCPUs one by one
    (empty: every vCPU gets ``restore_vcpu_cpus``), and
    ``restore_iothreads`` each I/O thread to its CPUs.
    """

    uuid: str
    name: str
    vcpus: int
    vm_class: str
    restore_vcpu_cpus: frozenset
    restore_emulator_cpus: frozenset
    has_channel: bool
    restore_vcpus: dict = dataclasses.field(default_factory=dict)
    restore_iothreads: dict = dataclasses.field(default_factory=dict)
    # The flavor's tail-latency target (us; None: none) and percentile.
    latency_target_us: int = None
    latency_percentile: float = 99.0


class NicCounters(typing.NamedTuple):
    """Cumulative traffic of one NIC, seen from the guest's side."""

    packets_in: int
    packets_out: int
    bytes_in: int
    bytes_out: int


@frozen.value
class Observation:
    """Cumulative counters of one guest, read at ``time`` (seconds).

    ``guest`` is the validated channel report (``None`` without a
    channel); the host counters cover the vCPU threads and, separately,
    every other thread of the guest (emulator, I/O, vhost): their CPU time
    and their run delay (time runnable but waiting for a CPU).
    ``nics`` counts the traffic of each NIC; a NIC plugged or unplugged
    between two observations is left out of their rates.
    """

    time: float
    vcpu_cpu_ns: int
    vcpu_wait_ns: int
    vcpu_slices: int
    emulator_cpu_ns: int
    guest: report.GuestReport = None
    emulator_wait_ns: int = 0
    emulator_threads: int = 0   # how many threads the emulator_* cover
    nics: dict = None   # {NIC name: NicCounters}; None: not known


# The two pinnings of a guest: its vCPU threads, and every other thread.
VCPU = 'vcpu'
EMULATOR = 'emulator'
# The driver method that pins each.
PIN_METHODS = {VCPU: 'pin_vcpus', EMULATOR: 'pin_emulator'}


class HypervisorDriver(abc.ABC):
    """The interface; see the module docstring for the calling rules."""

    @abc.abstractmethod
    def host_cpus(self):
        """Return :class:`HostCpus`."""

    @abc.abstractmethod
    def guests(self):
        """Return the managed guests as a list of :class:`Guest`.

        Every guest whose QEMU may still run: a paused guest, and one
        whose calls hang or fail, keeps its QEMU process, its threads and
        their pins, so it stays listed until the hypervisor says it is
        gone; the caller keeps its CPUs until then. Whether a guest is
        paused is told by PAUSED and RESUMED events (also for a guest
        found paused). A guest listed with other :class:`Guest` values
        than before runs a new QEMU of a new definition.
        """

    @abc.abstractmethod
    def events(self):
        """Return and forget the events seen since the last call.

        A list of (uuid, GuestEvent), oldest first.
        """

    @abc.abstractmethod
    def observe(self, uuid):
        """Return an :class:`Observation` of one guest."""

    @abc.abstractmethod
    def pin_vcpus(self, uuid, cpus):
        """Pin every vCPU thread of a guest to ``cpus`` (live only).

        Raises :class:`GuestBusy` when it pinned nothing because an
        earlier call on the guest has not returned; any other
        DriverError may leave some threads pinned and others not.
        """

    @abc.abstractmethod
    def pin_emulator(self, uuid, cpus):
        """Pin every non-vCPU thread of a guest to ``cpus`` (live only).

        Raises as :meth:`pin_vcpus` does.
        """

    def pin_many(self, pins):
        """Make ``pins``, ``(uuid, kind, cpus)``, in turn; an outcome each.

        ``kind`` is :data:`VCPU` (:meth:`pin_vcpus`) or :data:`EMULATOR`
        (:meth:`pin_emulator`). The outcome is None for a pin made, or
        the DriverError its method raised (a driver that hands the pins
        over together may return any exception a pin raised). Each is
        made as its method makes it alone; a driver may hand them to
        libvirt at a lower cost than one by one.
        """
        outcomes = []
        for uuid, kind, cpus in pins:
            try:
                getattr(self, PIN_METHODS[kind])(uuid, cpus)
            except DriverError as exc:
                outcomes.append(exc)
            else:
                outcomes.append(None)
        return outcomes

    def read_pins_many(self, uuids):
        """{uuid: :meth:`read_pins`' answer, or the exception it raised}.

        A driver may read them at a lower cost than one by one.
        """
        out = {}
        for uuid in uuids:
            try:
                out[uuid] = self.read_pins(uuid)
            except Exception as exc:
                out[uuid] = exc
        return out

    def busy_guests(self):
        """The uuids of guests whose earlier calls have not returned.

        Nothing can move their threads until those calls return.
        """
        return frozenset()

    def unadopted_pins(self):
        """{uuid: pins} of running domains not adopted for want of answers.

        :meth:`guests` left them out because their definition or state
        could not be read, not by policy. Such a domain may be one an
        earlier agent placed in a pool: its threads run where they were
        pinned. ``pins`` is (set of the vCPU pin sets, emulator set) as
        :meth:`read_pins`, or None when they cannot be read either.
        """
        return {}

    def guest_exists(self, uuid):
        """False only when the hypervisor says ``uuid`` does not exist.

        True when it exists, is only defined, or cannot be asked.
        """
        return True

    @abc.abstractmethod
    def set_vcpu_target(self, uuid, vcpus):
        """Ask the guest to keep ``vcpus`` online.

        Returns a sequence number to wait for, or None for a guest without
        a channel.
        """

    def set_vcpus_idle(self, uuid, idle):
        """Put the guest's vCPU threads at idle priority, or take them out.

        BE soak mode: in an idle scheduling group (cgroup ``cpu.idle``)
        they run only where nothing else wants the CPU. Raises
        DriverError if that cannot be done.
        """
        raise DriverError('%s cannot set idle priority'
                          % type(self).__name__)

    @abc.abstractmethod
    def acknowledged(self, uuid, seq):
        """True once the guest has applied target ``seq``."""

    @abc.abstractmethod
    def heartbeat(self):
        """Refresh the host heartbeat of every guest channel."""

    @abc.abstractmethod
    def read_pins(self, uuid):
        """Return the live pins: (set of the vCPU pin sets, emulator set)."""

    @abc.abstractmethod
    def release(self, uuid):
        """Give a guest back: all vCPUs online, its restore pins back.

        Must work whatever state the agent left the guest in.
        """

    @abc.abstractmethod
    def forget(self, uuid):
        """Drop what the driver keeps for a guest that is gone (its page)."""

    def close(self):
        """Release connections; the driver is not used afterwards."""
