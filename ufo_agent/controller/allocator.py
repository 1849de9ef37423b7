"""Turn per-VM and emulator demands into disjoint sets of physical cores.

Two steps, both deterministic:

1. :func:`allocate_counts` decides how many cores each owner gets. When
   demand fits, everyone gets what it asked for. When it does not, the
   documented rule (doc/source/controller.rst, "Overload") is, in order:
   the emulator pool's minimum; one idle-pool core if any VM shares the
   idle pool; one core per active VM (VMs that already hold cores first,
   then by uuid; VMs left without one share the idle pool); the emulator
   pool's growth up to ``emulator_fair`` (the part of its demand that is
   each guest's offloaded I/O within that guest's fair share); then
   committed demand, one core at a time to the VM with the highest
   utilization per core it has so far, a core it already holds counting
   ``incumbent`` more (max-min on core counts when no utilization is
   known), except that a core the emulator pool yielded for some VMs
   on this tick (``yielded_to``) is set aside and goes, after the rest
   is split, to the one of them with the largest deficit; the idle
   pool's committed cores above its floor (:mod:`.idle_pool`); the rest
   of the emulator pool's growth (I/O beyond some guest's fair share);
   then speculative demand (probes, new VMs' flavor-size starts) from
   what is left, max-min. Whatever committed demand was not met, a
   guest's charged I/O and the idle pool's included, is the shortfall.
2. :func:`assign_cores` picks the core ids: owners keep the cores they
   have, shrink from their smallest NUMA share and highest ids, and grow
   from the NUMA node where they already have most cores.
"""

import collections
import dataclasses
import heapq
import math

from ufo_agent import frozen


@frozen.value
class Request:
    """Demand of one active VM.

    ``committed`` cores it needs, ``want`` in all: the part above
    ``committed`` is speculative (a probe, or a new VM starting at its
    flavor size). ``charge`` cores of its vCPU demand were left out of
    ``committed`` because its I/O beyond a fair share is charged to it
    (:func:`charge_excess`): it is not served for them, but cores it
    needs and did not get are still counted short.
    """

    key: str
    holding: int
    committed: int
    want: int
    util: float = 0.0       # last utilization, % of one CPU
    # Its last samples say idle (not yet parked): served after busy VMs.
    quiet: bool = False
    charge: int = 0


@dataclasses.dataclass(frozen=True)
class Counts:
    emulator: int
    vms: dict           # key -> cores (0 for a VM that shares the idle pool)
    shortfall: int
    starved: frozenset  # active VMs that got no core of their own


def allocate_counts(total, emulator_min, emulator_want, requests,
                    shared_vms, idle_floor=1, emulator_fair=None,
                    incumbent=0.0, yielded_to=None, idle_extra=0):
    """Apply the overload rule; see the module docstring.

    ``emulator_fair`` (default: all of ``emulator_want``) is how large
    the emulator pool may grow ahead of committed vCPU demand.
    ``incumbent`` is the fraction by which another VM's utilization per
    core must exceed a holder's before a core it holds changes hands.
    ``yielded_to`` holds the keys of the VMs the emulator pool gave a
    core to on this tick: the split of committed demand cannot hand that
    core to another VM (why: doc/source/research/
    2026-11-30-yield-to-named-guest.rst).
    ``idle_extra`` is the idle pool's committed demand above its floor
    (:mod:`.idle_pool`), served while some VM shares the pool.
    """
    if emulator_fair is None:
        emulator_fair = emulator_want
    left = total - min(emulator_min, total)
    # An idle core is kept when some VM will share the idle pool: one is
    # parked, or there are more busy VMs than cores.
    keep_floor = shared_vms or sum(not r.quiet for r in requests) > left
    counts = _fill(total, emulator_min, emulator_want, emulator_fair,
                   requests, min(idle_floor, left) if keep_floor else 0,
                   incumbent, yielded_to,
                   idle_extra if shared_vms else 0)
    if counts.starved and not keep_floor and idle_floor:
        # Quiet VMs were left without a core: they share the idle pool.
        counts = _fill(total, emulator_min, emulator_want, emulator_fair,
                       requests, min(idle_floor, left), incumbent,
                       yielded_to)
    return counts


def fair_emulator_cores(emulator_want, offloaded, entitled):
    """Cores of the emulator pool's demand within the guests' fair shares.

    ``offloaded`` maps a guest to the CPU its emulator, I/O and vhost
    threads ran; ``entitled`` maps it to its flavor's vCPUs. The pool's
    demand is split by offloaded CPU; each guest's part counts up to its
    share of the pool by entitlement (VASE charges a VM's I/O to its own
    credit the same way); the rest is I/O beyond a fair share. Rounded
    up, so a pool no guest overdraws grows exactly as before.
    """
    busy = sum(max(0.0, v) for v in offloaded.values())
    weight = sum(entitled.get(k, 0) for k in offloaded)
    if busy <= 0 or weight <= 0:
        return emulator_want
    within = sum(min(emulator_want * max(0.0, v) / busy,
                     emulator_want * entitled.get(k, 0) / weight)
                 for k, v in offloaded.items())
    return min(emulator_want, int(math.ceil(within - 1e-9)))


def charge_excess(excess, offloaded, entitled):
    """{key: cores} of the pool's demand beyond fair shares, by guest.

    The ``excess`` cores (the pool's demand above
    :func:`fair_emulator_cores`) are charged to the guests whose share of
    the offloaded CPU is above their share of the entitlement, in
    proportion to how far above (largest remainder); such a guest's
    committed vCPU demand is lowered by its charge, so that its own I/O
    comes out of its own claim, not another guest's.
    """
    busy = sum(max(0.0, v) for v in offloaded.values())
    weight = sum(entitled.get(k, 0) for k in offloaded)
    if excess <= 0 or busy <= 0 or weight <= 0:
        return {}
    over = {k: max(0.0, v) - busy * entitled.get(k, 0) / weight
            for k, v in offloaded.items()}
    over = {k: o for k, o in over.items() if o > 0}
    total = sum(over.values())
    if total <= 0:
        return {}
    share = {k: excess * o / total for k, o in over.items()}
    charged = {k: int(math.floor(s)) for k, s in share.items()}
    left = excess - sum(charged.values())
    for k in sorted(share, key=lambda k: (charged[k] - share[k], k))[:left]:
        charged[k] += 1
    return {k: c for k, c in charged.items() if c}


def _fill(total, emulator_min, emulator_want, emulator_fair, requests,
          floor, incumbent, yielded_to=None, idle_extra=0):
    left = total
    emulator = min(emulator_min, left)
    left -= emulator + floor
    given = {}

    def first_cores(group):
        nonlocal left
        for req in sorted(group, key=lambda r: (r.holding == 0, r.key)):
            given[req.key] = 1 if left > 0 else 0
            left -= given[req.key]

    def deficit(req):
        # The VM whose utilization per core is highest (the largest
        # deficit) first, then the one with the fewest cores, the most
        # unmet, the uuid. Utilization was measured on the cores a VM
        # holds and moves with its count, so a core it holds changes
        # hands only on a clearly larger deficit: else the split flips
        # every tick.
        per_core = max(0.0, req.util) / given[req.key]
        if given[req.key] < req.holding:
            per_core *= 1.0 + incumbent
        return (-per_core, given[req.key],
                -(req.committed - given[req.key]), req.key, req)

    def committed_cores(group):
        # One core at a time, by deficit.
        nonlocal left
        heap = [deficit(req) for req in group
                if 0 < given[req.key] < req.committed]
        heapq.heapify(heap)
        while heap and left > 0:
            req = heapq.heappop(heap)[4]
            given[req.key] += 1
            left -= 1
            if given[req.key] < req.committed:
                heapq.heappush(heap, deficit(req))

    def grow_emulator(to):
        nonlocal left, emulator
        grow = min(max(0, min(to, emulator_want) - emulator), left)
        emulator += grow
        left -= grow

    busy = [req for req in requests if not req.quiet]
    quiet = [req for req in requests if req.quiet]
    first_cores(busy)
    grow_emulator(emulator_fair)
    named = [req for req in busy if req.key in (yielded_to or ()) and
             0 < given[req.key] < req.committed]
    set_aside = 1 if named and left > 0 else 0
    left -= set_aside
    committed_cores(busy)
    left += set_aside
    named = [deficit(req) for req in named
             if given[req.key] < req.committed]
    if set_aside and named:
        given[min(named)[4].key] += 1
        left -= 1
    idle = min(idle_extra, max(0, left))
    left -= idle
    first_cores(quiet)
    committed_cores(quiet)
    grow_emulator(emulator_want)
    # Speculative demand from what is left, max-min fair as well: new
    # VMs whose flavors do not all fit start at equal shares.
    want = {req.key: req.want for req in requests}
    heap = [(given[req.key], req.key) for req in requests
            if given[req.key] and req.committed <= given[req.key] < req.want]
    heapq.heapify(heap)
    while heap and left > 0:
        have, key = heapq.heappop(heap)
        given[key] += 1
        left -= 1
        if given[key] < want[key]:
            heapq.heappush(heap, (given[key], key))
    shortfall = max(0, emulator_want - emulator) + idle_extra - idle
    shortfall += sum(max(0, req.committed + req.charge - given[req.key])
                     for req in requests)
    starved = frozenset(key for key, cores in given.items() if not cores)
    return Counts(emulator, given, shortfall, starved)


def assign_cores(topology, emulator_current, emulator_count, vm_current,
                 vm_counts, held=None, idle_needed=False, emulator_min=0):
    """Return (emulator cores, {key: cores}, idle cores) as frozensets.

    ``held`` maps ``'emulator'`` or a key to cores it keeps whatever its
    count (threads there cannot move): others may get fewer than their
    counts. Held cores of a key without a count stay idle. Where held
    cores leave the idle pool empty while a VM runs there (``idle_needed``:
    one is parked; or one was left without a core), a VM core goes idle;
    where they leave the emulator pool below ``emulator_min``, VM cores
    go to it (:func:`_keep_emulator_min`).
    """
    managed = topology.core_ids
    held = held or {}
    pinned = frozenset().union(*held.values()) & managed
    owners = [('emulator', emulator_current, emulator_count)]
    owners += [(key, vm_current.get(key, frozenset()), vm_counts[key])
               for key in sorted(vm_counts)]
    kept = {}
    taken = set()
    for key, current, count in owners:
        mine = sorted((set(held.get(key, ())) & managed) - taken,
                      key=lambda c: (c not in current, c))
        if key != 'emulator' and not count:
            # A VM counted no core runs on the idle pool: its held cores
            # stay idle (pinned: no other pool gets them).
            mine = []
        kept[key] = set(mine)
        taken.update(kept[key])
    for key, current, count in owners:
        mine = sorted((set(current) & managed) - taken - pinned)
        room = max(0, count - len(kept[key]))
        if len(mine) > room:
            mine = _shrink(topology, mine, room, key == 'emulator')
        kept[key].update(mine)
        taken.update(mine)
    free = sorted(managed - taken - pinned)
    for key, _, count in owners:
        while len(kept[key]) < count and free:
            core = _pick(topology, kept[key], free, key == 'emulator')
            free.remove(core)
            kept[key].add(core)
    if len(kept['emulator']) < emulator_min:
        _keep_emulator_min(topology, kept, pinned, emulator_min,
                           emulator_current)
    taken = set().union(*kept.values())
    idle = set(free) | (pinned - taken)
    if held and not idle and (idle_needed or any(
            not kept[key] for key, _, _ in owners[1:])):
        idle.update(_make_room(topology, kept, pinned,
                               {key: count for key, _, count in owners}))
    emulator = frozenset(kept.pop('emulator'))
    vms = {key: frozenset(cores) for key, cores in kept.items()}
    return emulator, vms, frozenset(idle)


def _keep_emulator_min(topology, kept, pinned, minimum, current):
    """Cores for an emulator pool that held cores left below ``minimum``.

    Its cores are held where a hung guest's vCPUs sit on them (pinned
    there before the pool took them). Every guest's emulator threads
    would wait for that guest: the pool takes a movable core of the VM
    with most of them instead, or, without one, a core held for no
    pool (its own first), which it then shares with the hung threads.
    """
    emulator = kept['emulator']
    while len(emulator) < minimum:
        movable = {key: sorted(cores - pinned)
                   for key, cores in kept.items() if key != 'emulator'}
        movable = {key: cores for key, cores in movable.items() if cores}
        if movable:
            donor = max(movable, key=lambda key: (len(movable[key]), key))
            cores = movable[donor]
            core = set(cores) - set(_shrink(topology, cores,
                                            len(cores) - 1))
            kept[donor] -= core
        else:
            spare = pinned - set().union(*kept.values())
            if not spare:
                return
            core = {min(spare, key=lambda c: (c not in current, c))}
        emulator.update(core)


def _make_room(topology, kept, pinned, counts):
    """One core for the idle pool, which held cores left empty.

    Held cores can leave a VM that was counted a core with none, or the
    idle pool empty while a VM runs there: it runs on the idle pool's
    CPUs, which must not be empty. The core comes from the VM with most
    movable cores; without one, from the owner (``counts``: the
    emulator pool's and each VM's count) that keeps the most held cores
    beyond its count: their threads stay until their calls return, and
    the idle pool waits for that core meanwhile (the enforcer's
    ledger), as any pool given a hung thread's core. Returns the core
    taken (none when no owner keeps more than its count).
    """
    movable = {key: sorted(kept[key] - pinned)
               for key in counts if key != 'emulator'}
    movable = {key: cores for key, cores in movable.items() if cores}
    if movable:
        donor = max(movable, key=lambda key: (len(movable[key]), key))
        cores = movable[donor]
    else:
        surplus = {key: len(kept[key]) - count
                   for key, count in counts.items()
                   if len(kept[key]) > count}
        if not surplus:
            return set()
        donor = max(surplus, key=lambda key: (surplus[key], key))
        cores = sorted(kept[donor])
    stays = _shrink(topology, cores, len(cores) - 1, donor == 'emulator')
    core = set(cores) - set(stays)
    kept[donor] -= core
    return core


def _misplaced(topology, core, emulator):
    """0 where a core's class suits its owner, 1 where it does not.

    The emulator pool wants little cores, vCPU pools big ones (the
    adaptive emulator-thread scheduler's split); a host of one class
    ranks every core 0, so nothing changes there.
    """
    return int(topology.is_little(core) != emulator)


def _shrink(topology, cores, count, emulator=False):
    per_node = collections.Counter(topology.numa_node(c) for c in cores)
    # Drop cores of the wrong class first, then from the node where the
    # owner has the fewest cores, highest id first, so what stays is
    # compact.
    ranked = sorted(cores, key=lambda c: (
        -_misplaced(topology, c, emulator), per_node[topology.numa_node(c)],
        -c))
    return sorted(ranked[len(cores) - count:])


def _pick(topology, mine, free, emulator=False):
    if mine:
        per_node = collections.Counter(topology.numa_node(c) for c in mine)
    else:
        per_node = collections.Counter(topology.numa_node(c) for c in free)
    return min(free, key=lambda c: (_misplaced(topology, c, emulator),
                                    -per_node[topology.numa_node(c)], c))
