"""Pin calls that may still land, written down before they are made.

libvirt runs the calls that change a domain one at a time (its modify
job). A pin call the agent abandoned at its deadline goes on waiting in
libvirtd and lands when the job before it ends, maybe after the agent
died; queries of the pins answer meanwhile with the pins as they are.
An agent started then would see a guest where it is, not where that
call will put it, and could give those CPUs to another guest.

So before it makes pin calls the agent records, for each pinning
(``(uuid, kind)``, as the ledger keys them), the CPUs they may put its
threads on: the calls' targets (where the threads are now, a next agent
reads). The record is a file (:class:`~ufo_agent.state.InFlightRecord`)
written before the calls, at most once a tick and only when it changed.
An entry stays while a call on the guest may not have returned (the
driver's busy guests); it is dropped on the next write after its calls
returned, and when the guest's QEMU is gone.

A new agent reads the record at start. For each guest in it, it takes
the recorded CPUs as the guest's, besides those it reads (the ledger's
union, as guessed CPUs: the threads may never have run there, so they
hold the CPUs from every other pool but license no narrow onto them),
until one of its own pin calls on the guest has returned: libvirt ran
the earlier jobs on that domain before it, so nothing older can land
any more. That first call waits behind an old call still hung; the
guest is busy then, as any hung guest. It keeps each pinning within
the CPUs it was read on, so it is safe whichever call lands first (a
record left by a stop whose releases all failed holds every guest on
every managed CPU: a first call that had to find CPUs no other guest
holds would never be made). A guest that libvirt says does not exist
drops its entries.
"""

import logging

LOG = logging.getLogger(__name__)


class InFlightPins:
    """The CPUs each pinning's outstanding calls may still put it on.

    ``record``: the :class:`~ufo_agent.state.InFlightRecord` that keeps
    them across agents, or None to keep them in memory only.
    """

    def __init__(self, record=None):
        self.record = record
        self._cpus = {}         # (uuid, kind) -> CPUs
        self._saved = {}        # what the record holds
        # Guests an earlier agent's calls may still move: none of this
        # agent's pin calls on them has returned yet.
        self.inherited = set()
        self.error = None       # why the record could not be written
        # A write failed since the last expect(): not tried again before
        # the next one (a tick makes many calls).
        self._failing = False

    def load(self):
        """Take over the record an earlier agent (or restore) left."""
        if self.record is None:
            return
        entries = self.record.load()
        self._cpus = {(uuid, kind): frozenset(cpus)
                      for uuid, kinds in entries.items()
                      for kind, cpus in kinds.items()}
        self._saved = dict(self._cpus)
        self.inherited = set(entries)
        if entries:
            LOG.info('Pin calls on %d guest(s) may not have returned '
                     'when the last agent stopped (%s): their recorded '
                     'CPUs stay theirs until a pin call on them returns',
                     len(entries), self.record.path)

    def cpus(self, key):
        """The CPUs recorded for pinning ``key`` (empty: none)."""
        return self._cpus.get(key, frozenset())

    def uuids(self):
        return {uuid for uuid, _ in self._cpus}

    def expect(self, calls, outstanding):
        """Record the calls about to be made, then write if it changed.

        ``calls`` maps pinnings to the CPUs the calls may put them on;
        ``outstanding`` names the guests whose earlier calls may not
        have returned. The entries of other guests are dropped (their
        calls returned) unless an earlier agent's calls may still land.
        Returns True once the record holds every entry.
        """
        keep = set(outstanding) | self.inherited
        cpus = {key: value for key, value in self._cpus.items()
                if key[0] in keep}
        for key, more in calls.items():
            cpus[key] = cpus.get(key, frozenset()) | frozenset(more)
        self._cpus = cpus
        self._failing = False
        return self.flush()

    def cover(self, key, cpus):
        """True once the record holds ``cpus`` for ``key``.

        Written now if it did not: a call onto them may then be made.
        """
        cpus = frozenset(cpus)
        if cpus <= self._saved.get(key, frozenset()):
            return True
        self._cpus[key] = self.cpus(key) | cpus
        return not self._failing and self.flush()

    def returned(self, uuid):
        """A pin call of this agent on ``uuid`` returned successfully.

        libvirt ran every earlier job on the domain before it: an earlier
        agent's calls can no longer land.
        """
        self.inherited.discard(uuid)

    def drop(self, uuid):
        """Nothing more lands on ``uuid``.

        Its QEMU is gone, or it was given back by calls that all
        returned. Written on the next :meth:`expect` or :meth:`flush`.
        """
        self.inherited.discard(uuid)
        for key in [key for key in self._cpus if key[0] == uuid]:
            del self._cpus[key]

    def flush(self):
        """Write the record if it changed; False if it cannot be."""
        if self._cpus == self._saved:
            return True
        if self.record is not None:
            entries = {}
            for (uuid, kind), cpus in self._cpus.items():
                entries.setdefault(uuid, {})[kind] = cpus
            try:
                self.record.save(entries)
            except OSError as exc:
                self._failing = True
                if self.error != str(exc):
                    LOG.error('Cannot write the in-flight pin record %s: '
                              '%s. Pins that may move a guest onto other '
                              'CPUs wait until it can be written',
                              self.record.path, exc)
                self.error = str(exc)
                return False
            if self.error is not None:
                LOG.info('The in-flight pin record %s is written again',
                         self.record.path)
                self.error = None
        self._saved = dict(self._cpus)
        return True


def release_calls(guests):
    """{(uuid, kind): CPUs} that giving ``guests`` back may pin them on.

    Each :class:`~ufo_agent.driver.base.Guest` gets its definition's pins.
    """
    calls = {}
    for guest in guests:
        calls[(guest.uuid, 'vcpu')] = frozenset().union(
            guest.restore_vcpu_cpus, *guest.restore_vcpus.values())
        calls[(guest.uuid, 'emulator')] = frozenset().union(
            guest.restore_emulator_cpus, *guest.restore_iothreads.values())
    return calls
