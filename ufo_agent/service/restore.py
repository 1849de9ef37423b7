"""Give every guest back, retrying within a time budget (``--restore``).

``ufo-agent --restore`` is the systemd unit's fail-safe (``ExecStopPost``):
it often runs while the host is in trouble, libvirtd restarting or busy.
One failed call must not leave guests frozen on the agent's pins, so each
round connects if need be, lists the guests and releases those not yet
given back (all vCPUs online, the definition's pins), and rounds repeat
until every listed guest is back or the budget is spent. A guest that a
later listing no longer shows is gone and needs nothing. The outcome
names every guest that could not be given back, and why.
"""

import dataclasses
import logging
import time

from ufo_agent.driver import base

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
                   sleep=time.sleep):
    """Release every guest the driver lists, in rounds, within ``budget``.

    ``connect()`` returns a driver (or raises: tried again next round).
    A round that started runs to its end; no round starts after the
    budget is spent. Returns an :class:`Outcome`.
    """
    deadline = clock() + budget
    out = Outcome(unlisted='not tried')
    pending = {}            # uuid -> name, listed and not yet given back
    while True:
        if out.driver is None:
            try:
                out.driver = connect()
            except Exception as exc:
                out.unlisted = _why(exc)
        if out.driver is not None:
            _round(out, pending)
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


def _round(out, pending):
    try:
        listed = {g.uuid: g.name for g in out.driver.guests()}
    except Exception as exc:    # the fail-safe goes on whatever happens
        why = _why(exc)
        if out.unlisted is not None:
            out.unlisted = why
        LOG.warning('Could not list the guests: %s', why)
    else:
        out.unlisted = None
        out.names.update(listed)
        for uuid in set(pending) - set(listed):
            # Gone meanwhile: nothing left to give back.
            del pending[uuid]
            out.failed.pop(uuid, None)
        pending.update((uuid, name) for uuid, name in listed.items()
                       if uuid not in out.restored)
    for uuid in sorted(pending):
        try:
            out.driver.release(uuid)
        except Exception as exc:
            why = _why(exc)
            if out.failed.get(uuid) != why:
                LOG.error('Could not restore guest %s: %s', uuid, why)
            out.failed[uuid] = why
            continue
        out.restored[uuid] = pending.pop(uuid)
        out.failed.pop(uuid, None)
        LOG.info('Restored guest %s (%s)', uuid, out.restored[uuid])
