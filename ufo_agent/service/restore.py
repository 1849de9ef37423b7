"""Give every guest back, retrying within a time budget (``--restore``).

``ufo-agent --restore`` is the systemd unit's fail-safe (``ExecStopPost``):
it often runs while the host is in trouble, libvirtd restarting or busy.
One failed call must not leave guests frozen on the agent's pins, so each
round connects if need be, lists the guests and releases those not yet
given back (all vCPUs online, the definition's pins), and rounds repeat
until every listed guest is back or the budget is spent. A guest that a
later listing no longer shows is gone and needs nothing. The outcome
names every guest that could not be given back, and why.

The in-flight pin record (:mod:`.inflight`) is kept as the agent keeps
it: libvirt runs a guest's release calls after any pin call still
outstanding, so a release that returned leaves nothing to land; one that
did not is added to the record for the next agent, with what was there.
"""

import dataclasses
import logging
import time

from ufo_agent.driver import base
from ufo_agent.service import inflight as inflight_mod

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class Outcome:
    """What a restore achieved."""

    restored: dict = dataclasses.field(default_factory=dict)  # uuid: name
    failed: dict = dataclasses.field(default_factory=dict)    # uuid: why
    names: dict = dataclasses.field(default_factory=dict)     # uuid: name
    # Why the guests were never listed (None once a listing worked).
    unlisted: str = None
    driver: object = None       # the connected driver, for the caller

    @property
    def ok(self):
        return self.unlisted is None and not self.failed

    def summary(self, budget):
        """One sentence for the operator about what went wrong."""
        if self.unlisted is not None:
            return ('could not list the guests within %.0f s, no guest '
                    'was given back: %s' % (budget, self.unlisted))
        return ('could not give %d guest(s) back within %.0f s (%d given '
                'back): %s' % (len(self.failed), budget, len(self.restored),
                               '; '.join('%s (%s): %s' % (
                                   uuid, self.names.get(uuid, '?'), why)
                                   for uuid, why in sorted(
                                       self.failed.items()))))


def restore_guests(connect, budget, pause=1.0, clock=time.monotonic,
                   sleep=time.sleep, in_flight_record=None):
    """Release every guest the driver lists, in rounds, within ``budget``.

    ``connect()`` returns a driver (or raises: tried again next round).
    A round that started runs to its end; no round starts after the
    budget is spent. ``in_flight_record``: the
    :class:`~ufo_agent.state.InFlightRecord` to keep. Returns an
    :class:`Outcome`.
    """
    deadline = clock() + budget
    out = Outcome(unlisted='not tried')
    in_flight = inflight_mod.InFlightPins(in_flight_record)
    in_flight.load()
    pending = {}            # uuid -> Guest, listed and not yet given back
    while True:
        if out.driver is None:
            try:
                out.driver = connect()
            except Exception as exc:
                out.unlisted = _why(exc)
        if out.driver is not None:
            _round(out, pending, in_flight)
        if out.unlisted is None and not pending:
            return out
        if clock() + pause > deadline:
            return out
        LOG.warning('Restore incomplete (%s); trying again in %.1f s',
                    out.unlisted or '%d guest(s) left' % len(pending), pause)
        sleep(pause)


def _why(exc):
    if isinstance(exc, base.DriverError):
        return str(exc)
    # Not an error libvirt reports: a bug, said as such, not a traceback
    # that would end the fail-safe.
    LOG.debug('Unexpected error while restoring', exc_info=exc)
    return 'unexpected %s: %s' % (type(exc).__name__, exc)


def _round(out, pending, in_flight):
    try:
        listed = {g.uuid: g for g in out.driver.guests()}
    except Exception as exc:    # the fail-safe goes on whatever happens
        why = _why(exc)
        if out.unlisted is not None:
            out.unlisted = why
        LOG.warning('Could not list the guests: %s', why)
    else:
        out.unlisted = None
        out.names.update((uuid, g.name) for uuid, g in listed.items())
        for uuid in set(pending) - set(listed):
            # Gone meanwhile: nothing left to give back, or to land.
            del pending[uuid]
            out.failed.pop(uuid, None)
            in_flight.drop(uuid)
        pending.update((uuid, guest) for uuid, guest in listed.items()
                       if uuid not in out.restored)
    # On record before the calls; the guests not given back keep theirs
    # (a failed write does not stop the fail-safe).
    in_flight.expect(inflight_mod.release_calls(pending.values()),
                     set(pending))
    for uuid in sorted(pending):
        try:
            out.driver.release(uuid)
        except Exception as exc:
            why = _why(exc)
            if out.failed.get(uuid) != why:
                LOG.error('Could not restore guest %s: %s', uuid, why)
            out.failed[uuid] = why
            continue
        out.restored[uuid] = pending.pop(uuid).name
        out.failed.pop(uuid, None)
        in_flight.drop(uuid)
        LOG.info('Restored guest %s (%s)', uuid, out.restored[uuid])
    in_flight.flush()
