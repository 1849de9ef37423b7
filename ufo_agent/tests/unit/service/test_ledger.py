"""The ledger's indexes answer as a walk over every pinning would."""

import random

from ufo_agent.service import ledger as ledger_mod


def _walk(ledger, cpus, pool, exclude, joining, floating):
    """holders() by the definition: every pinning, every part."""
    if pool == ledger_mod.SOAK or (floating is not None and
                                   pool == floating):
        return []
    found = []
    for key in ledger.keys():
        entry = ledger.get(key)
        if key == exclude or joining.get(key) == pool or \
                ledger._own_unknown(key, entry, pool, exclude):
            continue
        if any(part_pool not in (pool, floating, ledger_mod.SOAK) and
               part_cpus & cpus for part_pool, part_cpus in entry.parts):
            found.append(key)
    return found


def test_holders_match_a_walk_over_every_pinning():
    rnd = random.Random(7)
    ledger = ledger_mod.Ledger()
    uuids = ['g%d' % i for i in range(8)]
    pools = [ledger_mod.SHARED, ledger_mod.EMULATOR, ledger_mod.SOAK] + \
        [ledger_mod.vm_pool(u) for u in uuids]

    def some_cpus():
        return frozenset(rnd.sample(range(16), rnd.randint(1, 6)))

    for _ in range(3000):
        key = (rnd.choice(uuids), rnd.choice(('vcpu', 'emulator')))
        step = rnd.randrange(6)
        entry = ledger.get(key)
        if step == 0 or entry is None:
            ledger.adopt(key, some_cpus(), exact=rnd.random() < 0.5,
                         guessed=rnd.random() < 0.2)
        elif step == 1:
            ledger.succeeded(key, rnd.choice(pools), some_cpus())
        elif step == 2:
            ledger.failed(key, rnd.choice(pools), some_cpus())
        elif step == 3 and entry.cpus & some_cpus():
            ledger.narrowed(key, entry.cpus & some_cpus() or entry.cpus)
        elif step == 4:
            ledger.joined(key, rnd.choice(pools))
        elif rnd.random() < 0.1:
            ledger.forget_guest(key[0])
        cpus = some_cpus()
        pool = rnd.choice(pools)
        exclude = (rnd.choice(uuids), rnd.choice(('vcpu', 'emulator')))
        joining = {k: rnd.choice(pools) for k in ledger.keys()
                   if rnd.random() < 0.2}
        floating = rnd.choice((None, ledger_mod.SHARED))
        assert ledger.holders(cpus, pool, exclude, joining, floating) == \
            _walk(ledger, cpus, pool, exclude, joining, floating)
        assert ledger.guessed() == {k for k in ledger.keys()
                                    if ledger.get(k).guessed}


def test_a_pinning_on_one_set_holds_that_very_set():
    ledger = ledger_mod.Ledger()
    key = ('g', 'vcpu')
    plan_cpus = frozenset({2, 3})
    ledger.succeeded(key, ledger_mod.SHARED, plan_cpus)
    # The enforcer's "pinned on this very set" check is by identity.
    assert ledger.get(key).cpus is plan_cpus
    ledger.joined(key, ledger_mod.vm_pool('g'))
    assert ledger.get(key).cpus is plan_cpus
    # Two parts (a failed pin): their union, as before.
    ledger.failed(key, ledger_mod.SHARED, {5})
    assert ledger.get(key).cpus == {2, 3, 5}


def test_a_failed_pin_narrows_only_where_every_thread_may_be():
    # libvirt pins vCPUs one by one: after a failed pin from {2, 8} to
    # {5, 11} some threads are on one set, some on the other. A narrow
    # may keep no CPU of either alone (before: all four).
    ledger = ledger_mod.Ledger()
    key = ('g', 'vcpu')
    ledger.succeeded(key, ledger_mod.vm_pool('g'), {2, 8})
    ledger.failed(key, ledger_mod.SHARED, {5, 11})
    entry = ledger.get(key)
    assert entry.cpus == {2, 5, 8, 11}
    assert entry.room == frozenset()
    # It joins the shared pool by its label: still no narrow.
    ledger.joined(key, ledger_mod.SHARED)
    assert ledger.get(key).room == frozenset()
    # A failed widen over the old set keeps the old set as its room.
    ledger.succeeded(key, ledger_mod.SHARED, {5, 11})
    ledger.failed(key, ledger_mod.vm_pool('g'), {2, 5, 8, 11})
    assert ledger.get(key).room == {5, 11}
