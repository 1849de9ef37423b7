"""Pure decisions of the overload-relief migration strategy.

No Nova or Watcher import: :mod:`ufo_nova.watcher.strategy` gathers the
inputs from Watcher's compute model and a signal source, calls
:func:`decide` and turns its moves into Watcher actions; the cloud
simulator calls the same function.

A host is in *sustained* overload when its latest signal is fresh and
overloaded and its signals were overloaded without a break for at least
``sustain_s`` seconds. A break is a signal in another state, or a gap
between two signals longer than ``max_age_s`` (the agent was silent: what
the host did meanwhile is unknown). One audit moves at most one instance
off each such host, the worst host first (most unmet cores), and at most
``max_migrations`` in all: the next audit sees what the moves did before
moving more.
"""

import dataclasses
import math

from ufo_agent import hostsignal
from ufo_nova import decision

LC = 'lc'
BE = 'be'


@dataclasses.dataclass(frozen=True)
class Instance:
    """An instance that may be moved.

    :param workload_class: :data:`LC` or :data:`BE`. Anything the caller
        cannot tell apart (``auto``, no extra spec) is LC: moving it is the
        one to avoid.
    :param cpu_cores: its recent CPU use in cores, None when unknown.
    :param memory_mb: checked against :class:`Capacity` when given.
    """

    uuid: str
    vcpus: int
    workload_class: str = LC
    cpu_cores: float = None
    memory_mb: int = 0

    def freed_cores(self, fraction):
        """Cores its departure gives back to its host's pools."""
        if self.cpu_cores is not None:
            return max(0.0, self.cpu_cores)
        return decision.expected_cores(self.vcpus, fraction)

    def needed_cores(self, fraction):
        """Idle cores a destination must have for it.

        The flavor's expected cores, or its recent use when higher: a
        guest that kept 6 cores busy needs 6 wherever it runs.
        """
        need = decision.expected_cores(self.vcpus, fraction)
        if self.cpu_cores is not None:
            need = max(need, math.ceil(self.cpu_cores - 1e-9))
        return need


@dataclasses.dataclass(frozen=True)
class Capacity:
    """Nova's free allocation on a host (vCPUs and memory, after ratios)."""

    vcpus: float
    memory_mb: float


@dataclasses.dataclass(frozen=True)
class Move:
    """One live migration, and why."""

    instance: str
    source: str
    destination: str
    vcpus: int
    needed_cores: int
    reason: str


@dataclasses.dataclass(frozen=True)
class Decision:
    """The moves of an audit, and why sustained-overloaded hosts got none.

    ``held`` lists ``(host, reason)``.
    """

    moves: tuple = ()
    held: tuple = ()


def fresh_signal(history, now, max_age_s):
    """The latest signal of ``history`` if fresh, else None (unknown)."""
    if not history:
        return None
    latest = history[-1]
    if now - latest.timestamp > max_age_s:
        return None
    return latest


def overload_start(history, now, max_age_s):
    """Start of the current unbroken overload, or None.

    :param history: the host's signals, oldest first.
    :returns: the timestamp of the first signal of the run of overloaded
        signals that ends with the latest one, when that one is fresh.
    """
    latest = fresh_signal(history, now, max_age_s)
    if latest is None or latest.state != hostsignal.OVERLOADED:
        return None
    start = latest.timestamp
    for earlier in reversed(history[:-1]):
        if earlier.state != hostsignal.OVERLOADED:
            break
        if start - earlier.timestamp > max_age_s:
            break
        start = earlier.timestamp
    return start


def _pick_instance(candidates, unmet, fraction):
    """The instance to move off a host short of ``unmet`` cores.

    Among those whose departure covers the shortfall: BE before LC (moving
    a BE guest disturbs no LC tenant), then the fewest vCPUs. When none
    covers it alone: the one that gives back the most, BE first on ties,
    so that the next audit has less to do.
    """
    covering = [i for i in candidates if i.freed_cores(fraction) >= unmet]
    if covering:
        chosen = min(covering, key=lambda i: (i.workload_class != BE,
                                              i.vcpus, i.uuid))
        return chosen, True
    chosen = min(candidates, key=lambda i: (-i.freed_cores(fraction),
                                            i.workload_class != BE,
                                            i.vcpus, i.uuid))
    return chosen, False


def decide(histories, instances, now, sustain_s, max_age_s, cooldown_s,
           max_migrations, fraction, last_migrated=None, capacity=None):
    """Decide the live migrations of one audit.

    :param histories: ``{host: [HostSignal, ...]}``, oldest first. Hosts
        absent or with a stale latest signal are unknown: never a source
        nor a destination.
    :param instances: ``{host: [Instance, ...]}``: the instances that may
        move (active, not excluded by the audit's scope).
    :param now: seconds, on the clock of the signals' timestamps.
    :param fraction: ``[ufo] expected_demand_fraction``.
    :param last_migrated: ``{instance uuid: time of its last migration}``.
    :param capacity: ``{host: Capacity}``; when given, a destination
        must also have Nova's room for the instance (a host missing from it
        has none).
    :returns: a :class:`Decision`.
    """
    last_migrated = last_migrated or {}
    latest = {}
    sources = []
    for host, history in histories.items():
        signal = fresh_signal(history, now, max_age_s)
        if signal is None:
            continue
        latest[host] = signal
        start = overload_start(history, now, max_age_s)
        if start is not None and now - start >= sustain_s:
            sources.append((host, now - start))
    # Worst first: the most unmet cores, then the longest overload.
    sources.sort(key=lambda s: (-latest[s[0]].unmet_cores, -s[1], s[0]))

    idle = {h: s.idle_cores for h, s in latest.items()
            if s.state == hostsignal.UNDERLOADED}
    reclaimable = {h: latest[h].reclaimable_cores for h in idle}
    room = dict(capacity) if capacity is not None else None
    moves = []
    held = []
    for host, duration in sources:
        if len(moves) >= max_migrations:
            held.append((host, 'max_migrations (%d) reached in this audit'
                         % max_migrations))
            continue
        unmet = latest[host].unmet_cores
        candidates = [
            i for i in instances.get(host, ())
            if i.uuid not in last_migrated
            or now - last_migrated[i.uuid] >= cooldown_s]
        if not candidates:
            held.append((host, 'no instance that may move (none, or all '
                         'migrated less than %.0f s ago)' % cooldown_s))
            continue
        moved = None
        # The preferred instance first; if no destination fits it, the
        # next in the same order.
        remaining = list(candidates)
        while remaining and moved is None:
            chosen, covers = _pick_instance(remaining, unmet, fraction)
            remaining.remove(chosen)
            need = chosen.needed_cores(fraction)
            fits = [d for d in idle if d != host and idle[d] >= need
                    and (room is None or (
                        d in room and room[d].vcpus >= chosen.vcpus
                        and room[d].memory_mb >= chosen.memory_mb))]
            if not fits:
                continue
            dest = min(fits, key=lambda d: (-reclaimable[d], -idle[d], d))
            moved = Move(
                instance=chosen.uuid, source=host, destination=dest,
                vcpus=chosen.vcpus, needed_cores=need,
                reason='%s overloaded for at least %.0f s (unmet %d '
                       'cores); %s %s (%d vCPUs, gives back %s cores) %s; '
                       '%s underloaded '
                       'with %d reclaimable, %d idle cores >= %d needed'
                       % (host, duration, unmet, chosen.workload_class.upper(),
                          chosen.uuid, chosen.vcpus,
                          _cores(chosen.freed_cores(fraction)),
                          'covers the shortfall' if covers else
                          'relieves it most (none covers it alone)',
                          dest, reclaimable[dest], idle[dest], need))
            idle[dest] -= need
            reclaimable[dest] = max(0, reclaimable[dest] - need)
            if room is not None:
                room[dest] = Capacity(room[dest].vcpus - chosen.vcpus,
                                      room[dest].memory_mb - chosen.memory_mb)
            moves.append(moved)
        if moved is None:
            held.append((host, 'no underloaded host with a fresh signal has '
                         'room for any of its %d movable instances'
                         % len(candidates)))
    return Decision(tuple(moves), tuple(held))


def _cores(value):
    return ('%d' % value) if float(value).is_integer() else ('%.1f' % value)
