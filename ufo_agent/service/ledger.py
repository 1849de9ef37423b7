"""Which pool each host CPU may belong to, as far as the host can know.

Every pinning of a guest (its vCPU threads, its emulator threads) has a
*pool* label and the set of CPUs its threads *may* run on. After a pin
call succeeds that set is exactly what was pinned; after one fails it is
unknown, so the ledger keeps the union of the old and the attempted set
and a label of its own that no other pinning shares: libvirt pins vCPUs one
by one and a failure can leave any mix behind.

The rule the enforcer follows: a pinning joins a pool on a set of CPUs
(by a pin, or by a change of label once it is inside them) only when no
pinning of another pool may hold any of them. Narrowing (pinning to a
subset, keeping its labels) is always allowed. So whatever fails, no CPU
is ever in two pools once it has been given to one; guests adopted from
Nova's default (every vCPU floating over the shared set) start with a
label of their own and join their pools after their first narrow.

A narrow is safe because the threads may already run on every CPU it
keeps. That holds for pins seen (read, or written by the agent), not for
a pinning whose pins could not be read: it is assumed on every managed
CPU (*guessed*) so that nobody moves onto CPUs it may hold, but its
threads may never have run on most of them. Its first pin is therefore
a widen: onto CPUs no other pool may hold. A pinning read but guessed
wider (an earlier agent's call may still move it) may narrow within
the CPUs it was read on (*seen*): libvirt runs that call first, so the
threads end where they were seen. The same holds for pins read as
different sets for different threads (libvirt pins vCPUs one by one, so
a call cut short leaves a mix), and for a pin call that failed: the
pinning holds their union, but it narrows only within the CPUs common
to all of them. A narrow onto the
others could move a thread beside another pool: pins are found as
they are, overlapping other guests' where they do.
"""

import functools

from ufo_agent import frozen

SHARED = 'shared'           # idle pool: parked and best-effort VMs
EMULATOR = 'emulator'       # shared emulator pool
# Best-effort vCPUs at idle priority (be_policy = soak): on every managed
# CPU by design, they hold no CPU from anyone (the enforcer lets a
# pinning in only once its idle priority is set, and out of idle priority
# only once it has left).
SOAK = 'soak'


def vm_pool(uuid):
    """The label of a VM's own vCPU pool."""
    return 'vm:%s' % uuid


def unknown(key):
    """A label shared with nobody: the pinning's state is not known."""
    return 'unknown:%s:%s' % key


@frozen.value
class Entry:
    """A pinning's CPUs, by pool: one part once a pin succeeded.

    After a failed pin the threads may be in the old set (old pool) or in
    the attempted one (new pool): both parts are kept.
    """

    parts: tuple              # ((pool, frozenset of CPUs), ...)
    exact: bool = True        # False: a superset of where the threads are
    # True: the CPUs are assumed (pins unreadable, or an earlier agent's
    # call may still land), not seen: a pin within them may move threads
    # onto CPUs they never ran on.
    guessed: bool = False
    # The CPUs every thread was seen on when fewer than ``cpus`` (None:
    # all of them; empty: pins not read): a narrow within them keeps
    # each thread where it ran.
    seen: frozenset = None

    @functools.cached_property
    def cpus(self):
        # Asked for every pinning several times a tick: computed once.
        # One part's is that part's set itself: a pinning pinned to its
        # plan's set holds that very set, which the enforcer tells by
        # identity and compares in no time (a union was a new set, so
        # every pinning was compared CPU by CPU, tick after tick).
        if len(self.parts) == 1 and type(self.parts[0][1]) is frozenset:
            return self.parts[0][1]
        return frozenset().union(*[cpus for _, cpus in self.parts])

    @property
    def room(self):
        """The CPUs a narrow may keep (see ``seen``)."""
        return self.cpus if self.seen is None else self.seen

    @property
    def pool(self):
        """The pool, or None while the pinning may be in two."""
        return self.parts[0][0] if len(self.parts) == 1 else None


class Ledger:
    """Pinnings keyed by ``(uuid, kind)``, kind ``vcpu`` or ``emulator``."""

    def __init__(self):
        self._entries = {}
        # CPU -> {pool: the key, or the set of keys, with a part in that
        # pool on the CPU}: holders() looks up the CPUs it is asked about,
        # and skips whole pools there (every guest's emulator pinning
        # shares its CPUs). A key alone is not put in a set: most pools
        # are one pinning's (its own unknown label), and a set for each,
        # on each of its CPUs, took tens of MB at 500 guests.
        self._by_cpu = {}
        self._guessed = set()       # keys of guessed pinnings

    def get(self, key):
        return self._entries.get(key)

    def _set(self, key, entry):
        old = self._entries.get(key)
        if old is not None:
            self._unindex(key, old)
        by_cpu = self._by_cpu
        for pool, cpus in entry.parts:
            for cpu in cpus:
                pools = by_cpu.setdefault(cpu, {})
                held = pools.get(pool)
                if held is None:
                    pools[pool] = key
                elif type(held) is set:
                    held.add(key)
                elif held != key:
                    pools[pool] = {held, key}
        self._entries[key] = entry
        if entry.guessed:
            self._guessed.add(key)
        else:
            self._guessed.discard(key)

    def _unindex(self, key, entry):
        by_cpu = self._by_cpu
        for pool, cpus in entry.parts:
            for cpu in cpus:
                pools = by_cpu[cpu]
                held = pools[pool]
                if type(held) is not set:
                    del pools[pool]
                    continue
                held.discard(key)
                if len(held) == 1:
                    pools[pool] = next(iter(held))

    def guessed(self):
        """The keys of the guessed pinnings (see :class:`Entry`)."""
        return frozenset(self._guessed)

    def adopt(self, key, cpus, exact=False, guessed=False, seen=None):
        """A pinning found as it is (not written by us): pool unknown.

        ``guessed``: ``cpus`` is where its pins may be, not where they
        were seen; ``seen``: the CPUs every thread was read on (None:
        ``cpus`` if not guessed, none if guessed: not read).
        """
        cpus = frozenset(cpus)
        if seen is not None:
            seen = frozenset(seen) & cpus
        if guessed and seen is None:
            seen = frozenset()
        elif not guessed and seen == cpus:
            seen = None
        self._set(key, Entry(((unknown(key), cpus),),
                             exact and not guessed and seen is None,
                             guessed, seen))

    def succeeded(self, key, pool, cpus):
        self._set(key, Entry(((pool, frozenset(cpus)),)))

    def joined(self, key, pool):
        """The pinning is inside ``pool``'s CPUs: only its label changes."""
        entry = self._entries[key]
        self._set(key, Entry(((pool, entry.cpus),), entry.exact,
                             entry.guessed, entry.seen))

    def narrowed(self, key, kept):
        """A pin to a subset succeeded: same pools, fewer CPUs."""
        parts = [(pool, cpus & kept) for pool, cpus in
                 self._entries[key].parts if cpus & kept]
        self._set(key, Entry(tuple(parts), True))

    def failed(self, key, pool, attempted):
        """A pin call failed: the threads may be in the old or new set.

        Each thread is where it was or where the call put it (libvirt
        pins vCPUs one by one), so a narrow keeps only the CPUs common
        to both: the old room and the attempted set.
        """
        entry = self._entries.get(key)
        attempted = frozenset(attempted)
        parts = dict(entry.parts) if entry is not None else {}
        parts[pool] = parts.get(pool, frozenset()) | attempted
        seen = entry.room & attempted if entry is not None else frozenset()
        self._set(key, Entry(tuple(sorted(parts.items())), False,
                             entry is not None and entry.guessed, seen))

    def restore(self, key, entry):
        """Put back ``entry``: a pin held as failed was never made."""
        self._set(key, entry)

    def forget_guest(self, uuid):
        for key in [k for k in self._entries if k[0] == uuid]:
            self._guessed.discard(key)
            self._unindex(key, self._entries.pop(key))

    def holders(self, cpus, pool, exclude, joining=None, floating=None):
        """Pinnings of another pool that may run on any of ``cpus``.

        ``joining`` maps the keys that are on their way into a pool and
        already inside its CPUs to that pool: they count as its members.
        ``floating`` names a pool that shares CPUs with every other by
        design (the shared pool of a small host without an idle core,
        which is every managed CPU): what is in it holds no CPU from
        anyone, and nothing holds CPUs from it.
        """
        if pool == SOAK or (floating is not None and pool == floating):
            return []
        joining = joining or {}
        skip = (pool, floating, SOAK)
        by_cpu = self._by_cpu
        near = set()
        for cpu in cpus:
            pools = by_cpu.get(cpu)
            if pools:
                for part_pool, held in pools.items():
                    if part_pool not in skip:
                        if type(held) is set:
                            near.update(held)
                        else:
                            near.add(held)
        entries = self._entries
        return sorted(key for key in near
                      if key != exclude and joining.get(key) != pool and
                      not self._own_unknown(key, entries[key], pool,
                                            exclude))

    @staticmethod
    def _own_unknown(key, entry, pool, exclude):
        """A pinning that cannot keep a guest's vCPUs from its own pool.

        The guest's other pinning (its emulator threads), as found and
        not yet placed: a label nobody else shares, so only that guest's
        own threads run there. Found pins may need a swap (a guest that
        migrated in from a host whose plan differs): its vCPUs go first.
        Guessed pins (unreadable) hold every CPU, so either pinning of
        the guest may go first, into any pool.
        """
        return (key[0] == exclude[0] and
                (pool == vm_pool(exclude[0]) or entry.guessed) and
                all(part_pool == unknown(key) for part_pool, _ in
                    entry.parts))

    def keys(self):
        return sorted(self._entries)
