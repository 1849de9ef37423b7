"""Measure the engine on random static cells; fit the surrogate to them.

``python -m ufo_sim.cluster.surrogate_fit`` fits the surrogate host
model (:mod:`ufo_sim.cluster.surrogate`) from the stored engine
measurements and writes its parameters; ``--collect`` first measures
the engine anew (minutes). The cells are drawn at random: a host of
``CORES`` cores, one to three VMs of random profiles, flavors, loads and
layouts (all shared as Nova's default; isolated cores with the emulator
at home or in a common pool, as DynIso and UFO place them; BE VMs
floating over what LC VMs left). Each cell runs one control interval to
warm up, then is measured over ``MEASURE`` intervals, static.

The cells fitted on (seeds from ``FIT_SEED``) and the held-out cells
(seeds from ``HELD_OUT_SEED``, never used in fitting or in choosing the
model) are stored in ``surrogate_data.json``; ``--validate`` prints the
error on both as RESULT lines. ``--validate --today`` measures the
held-out cells again on today's engine, twice (at their seeds and at
others), and prints the surrogate's error against that, how far the
stored cells are from it, and how far two engine seeds are apart: the
best any model of the engine could agree with one measurement.
``--collect-low`` measures the low-load cells (:func:`draw_low_cell`,
seeds from ``LOW_FIT_SEED`` and ``LOW_HELD_OUT_SEED``) anew in place of
the stored ones;
``--collect-parked`` the parked-wait cells (:func:`draw_parked_cell`,
fitted on only).
"""

import argparse
import json
import math
import multiprocessing
import os
import sys

import numpy as np

from ufo_sim.cluster import host as host_mod
from ufo_sim.cluster import host_features
from ufo_sim.cluster import surrogate
from ufo_sim import engine
from ufo_sim import profiles

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, 'surrogate_data.json')
PARAMS = os.path.join(HERE, 'surrogate_params.json')
CORES = 6
SMT = 2
MEASURE = 2
FLAVORS = (2, 4, 8)
KINDS = ('memcached', 'nginx', 'mysql', 'be')
# Low-load cells (draw_low_cell): LOW_SPAN seeds from each of these.
LOW_FIT_SEED, LOW_HELD_OUT_SEED, LOW_SPAN = 3000, 7000, 1000
LOW_LOADS = (0.0003, 0.05)
LOW_BE_PER_CPU = (0.2, 2.0)
# Parked-wait cells (draw_parked_cell): PARKED_CELLS seeds from
# PARKED_SEED, each with one of PARKED_THREADS busy threads on the
# parked vCPU's CPU, at PARKED_RPS requests a real second.
PARKED_SEED, PARKED_CELLS = 9000, 60
PARKED_THREADS = (1, 2)
PARKED_RPS = 50.0
# The engine seed's offset that measures the held-out cells' noise.
REPEAT_SEED_OFFSET = 100000


def draw_cell(seed):
    """A random static cell: its VMs and their pins, loads, online."""
    if is_low(seed):
        return draw_low_cell(seed)
    if is_parked(seed):
        return draw_parked_cell(seed)
    rng = np.random.default_rng(seed)
    cpus = list(range(CORES * SMT))
    cores = [cpus[i:i + SMT] for i in range(0, len(cpus), SMT)]
    n = int(rng.integers(1, 4))
    layout = str(rng.choice(['shared', 'isolated', 'isolated-pool',
                             'be-float']))
    vms = []
    for i in range(n):
        kind = str(rng.choice(KINDS, p=[0.3, 0.25, 0.25, 0.2]))
        vcpus = int(rng.choice(FLAVORS))
        vms.append(dict(name='v%d' % i, profile=kind, vcpus=vcpus,
                        load=float(rng.uniform(0.05, 1.0)),
                        threads=int(rng.integers(1, vcpus + 1)),
                        online=vcpus))
    if layout == 'shared':
        for vm in vms:
            vm['vcpu_cpus'] = vm['emu_cpus'] = cpus
        return dict(seed=seed, layout=layout, vms=vms)
    free = list(cores)
    pool = free.pop() if layout == 'isolated-pool' else None
    floating = []
    for vm in vms:
        if layout == 'be-float' and vm['profile'] == 'be':
            floating.append(vm)
            continue
        most = max(1, min(math.ceil(vm['vcpus'] / SMT),
                          len(free) - (len(vms) - 1)))
        k = int(rng.integers(1, most + 1)) if free else 0
        mine = [c for core in free[:k] for c in core] or cpus
        free = free[k:]
        vm['vcpu_cpus'] = mine
        vm['emu_cpus'] = pool if pool else mine
        if rng.random() < 0.5:
            vm['online'] = max(1, min(vm['vcpus'], len(mine)))
    rest = [c for core in free for c in core] or cpus
    for vm in floating:
        vm['vcpu_cpus'] = vm['emu_cpus'] = rest
    return dict(seed=seed, layout=layout, vms=vms)


def is_low(seed):
    """Do cells of this seed come from :func:`draw_low_cell`?"""
    return any(first <= seed < first + LOW_SPAN
               for first in (LOW_FIT_SEED, LOW_HELD_OUT_SEED))


def is_parked(seed):
    """Do cells of this seed come from :func:`draw_parked_cell`?"""
    return PARKED_SEED <= seed < PARKED_SEED + PARKED_CELLS


def draw_parked_cell(seed):
    """A parked LC VM's vCPU on one CPU with a number of busy threads.

    One vCPU online of four, on CPU 0 with ``PARKED_THREADS`` busy BE
    threads, its sibling busy with one more; emulator threads on the
    last core. The profile and the thread count go round with the
    seed. What the share of requests over the target is with one
    thread or two on the vCPU's CPU (:func:`fit_parked`).
    """
    i = seed - PARKED_SEED
    kind = KINDS[i % 3]
    threads = PARKED_THREADS[(i // 3) % len(PARKED_THREADS)]
    p = profiles.by_name(kind)
    emulator = list(range((CORES - 1) * SMT, CORES * SMT))
    lc = dict(name='v0', profile=kind, vcpus=4, threads=4, online=1,
              load=PARKED_RPS / engine.TIME_SCALE * p.vcpus /
              (p.max_rps * 4), vcpu_cpus=[0], emu_cpus=emulator)
    be = dict(name='b0', profile='be', vcpus=4, load=0.0,
              threads=threads, online=4, vcpu_cpus=[0], emu_cpus=emulator)
    sibling = dict(be, name='b1', threads=1, vcpu_cpus=[1])
    return dict(seed=seed, layout='parked', vms=[lc, be, sibling],
                threads=threads)


def fit_parked(cells):
    """A parked vCPU's share of requests over the target, by threads.

    Per profile and busy threads on the vCPU's CPU (as a string): the
    requests over the target over those done, pooled over the
    parked-wait cells.
    """
    counts = {}
    for cell in cells:
        if not is_parked(cell['seed']):
            continue
        for vm, row, p, _ in lc_rows(cell):
            key = (vm['profile'], str(cell['threads']))
            over, done = counts.get(key, (0, 0))
            counts[key] = (over + row['over_target'],
                           done + row['requests_done'])
    out = {}
    for (name, threads), (over, done) in sorted(counts.items()):
        out.setdefault(name, {})[threads] = round(over / max(1, done), 5)
    return out


def draw_low_cell(seed):
    """A static cell of one LC VM at a load under ``LOW_LOADS[1]``.

    Loads log-uniform over ``LOW_LOADS``, in one of three layouts, each
    with an emulator pool on the last core as UFO keeps one:
    ``low-alone`` (cores of its own), ``low-parked`` (one vCPU online
    among BE VMs' busy threads on an idle pool, as UFO parks a quiet
    VM) and ``low-float`` (all vCPUs online, floating among them), the
    busy threads per pool CPU uniform over ``LOW_BE_PER_CPU``.
    """
    rng = np.random.default_rng(seed)
    cpus = list(range(CORES * SMT))
    cores = [cpus[i:i + SMT] for i in range(0, len(cpus), SMT)]
    emulator = cores[-1]
    layout = str(rng.choice(['low-alone', 'low-parked', 'low-float']))
    kind = str(rng.choice(KINDS[:3]))
    vcpus = int(rng.choice(FLAVORS))
    low, high = (math.log(x) for x in LOW_LOADS)
    lc = dict(name='v0', profile=kind, vcpus=vcpus,
              load=float(math.exp(rng.uniform(low, high))),
              threads=vcpus, online=vcpus, emu_cpus=emulator)
    if layout == 'low-alone':
        k = int(rng.integers(1, math.ceil(vcpus / SMT) + 1))
        lc['vcpu_cpus'] = [c for core in cores[:k] for c in core]
        return dict(seed=seed, layout=layout, vms=[lc])
    pool = [c for core in cores[:int(rng.integers(1, 5))] for c in core]
    lc['vcpu_cpus'] = pool
    if layout == 'low-parked':
        lc['online'] = 1
    vms = [lc]
    # Busy BE threads per pool CPU spread evenly: whether a CPU is left
    # free for the woken vCPU decides its wait.
    left = max(1, int(round(rng.uniform(*LOW_BE_PER_CPU) * len(pool))))
    while left:
        be_vcpus = int(rng.choice(FLAVORS))
        threads = min(left, be_vcpus)
        left -= threads
        vms.append(dict(name='b%d' % (len(vms) - 1), profile='be',
                        vcpus=be_vcpus, load=0.0, threads=threads,
                        online=be_vcpus, vcpu_cpus=pool,
                        emu_cpus=emulator))
    return dict(seed=seed, layout=layout, vms=vms)


def profile_of(vm):
    if vm['profile'] == 'be':
        return profiles.BE(threads=vm['threads'])
    return profiles.by_name(vm['profile'])


def rps_of(vm):
    p = profile_of(vm)
    return vm['load'] * p.max_rps * vm['vcpus'] / p.vcpus if p.is_lc \
        else 0.0


def run_cell(cell):
    """Measure ``cell`` on the engine: one row per VM.

    The engine's seed is the cell's, or its ``engine_seed`` if given.
    """
    host = engine.SimHost(engine.HostSpec(cores=CORES, smt=SMT),
                          seed=cell.get('engine_seed', cell['seed']))
    tick = engine.TIME_SCALE
    for vm in cell['vms']:
        host.add_vm(vm['name'], vm['vcpus'], profile_of(vm),
                    rps=rps_of(vm))
        host.pin_vcpus(vm['name'], vm['vcpu_cpus'])
        host.pin_emulator(vm['name'], vm['emu_cpus'])
        host.set_online(vm['name'], vm['online'])
    host.advance(tick)
    start = {vm['name']: host.counters(vm['name']) for vm in cell['vms']}
    if is_parked(cell['seed']):
        # Its share of requests over the target counts the measured
        # seconds' requests only. (The other stored cells were measured
        # with the warm-up second's latencies in their p99.)
        for vm in cell['vms']:
            host.take_latencies(vm['name'])
    lat = {vm['name']: [] for vm in cell['vms']}
    for _ in range(MEASURE):
        host.advance(tick)
        for vm in cell['vms']:
            lat[vm['name']].append(host.take_latencies(vm['name']))
    rows = []
    for vm in cell['vms']:
        name = vm['name']
        a, b = start[name], host.counters(name)
        values = np.concatenate(lat[name]) if lat[name] else np.zeros(0)
        d = {f: getattr(b, f) - getattr(a, f) for f in (
            'vcpu_cpu_ns', 'vcpu_wait_ns', 'vcpu_slices', 'emulator_cpu_ns',
            'emulator_wait_ns', 'guest_busy_ns', 'guest_ctxsw',
            'guest_sched_in', 'requests_done', 'requests_arrived',
            'requests_dropped')}
        d['p99_us'] = float(np.percentile(values, 99)) if len(values) \
            else None
        p = profile_of(vm)
        d['over_target'] = int(np.sum(values > p.qos_p99_us)) if p.is_lc \
            else None
        d['seconds'] = MEASURE * tick
        rows.append(d)
    return dict(cell, measured=rows)


def collect(count, first_seed, workers):
    return measure([draw_cell(first_seed + i) for i in range(count)],
                   workers)


def measure(cells, workers):
    """``cells`` measured on the engine, in order (see :func:`run_cell`)."""
    count = len(cells)
    with multiprocessing.Pool(workers) as pool:
        out = []
        for i, done in enumerate(pool.imap(run_cell, cells)):
            out.append(done)
            if (i + 1) % 20 == 0:
                print('measured %d/%d cells' % (i + 1, count),
                      file=sys.stderr, flush=True)
    return out


def _served(row):
    done, arrived = row['requests_done'], row['requests_arrived']
    return arrived > 0 and done >= 0.97 * arrived


def fit_costs(cells):
    """Per profile: CPU per request (LC) or per busy thread (BE)."""
    per = {}
    for cell in cells:
        for vm, row in zip(cell['vms'], cell['measured']):
            per.setdefault(vm['profile'], []).append((vm, row))
    cost, rates = {}, {}
    for name, items in sorted(per.items()):
        if name == 'be':
            emu = [r['emulator_cpu_ns'] / 1e9 / r['seconds'] /
                   min(vm['threads'], vm['online']) for vm, r in items]
            cost[name] = dict(vcpu_s=0.0, emu_a=0.0, emu_b=1.0,
                              emu_per_thread=float(np.median(emu)))
        else:
            ok = [(vm, r) for vm, r in items if _served(r)]
            # Demand is the guest's work: the vCPU threads' CPU beyond
            # it is halt polling, which a busier vCPU does not do.
            units = [r['requests_done'] for _, r in ok]
            cpu = [r['guest_busy_ns'] / 1e9 for _, r in ok]
            cost[name] = dict(
                vcpu_s=float(np.median([c / u for c, u in zip(cpu, units)
                                        if u])),
                emu_a=0.0, emu_b=1.0,
                emu_per_thread=0.0)
            # Emulator CPU a second grows slower than the requests: at
            # higher rates a wake-up of its threads serves more of them.
            # A power law, fitted in logs.
            x = np.array([[1.0, math.log(rps_of(vm))] for vm, r in ok
                          if r['emulator_cpu_ns'] > 0])
            y = np.array([math.log(r['emulator_cpu_ns'] / 1e9 /
                                   r['seconds']) for _, r in ok
                          if r['emulator_cpu_ns'] > 0])
            log_a, b = np.linalg.lstsq(x, y, rcond=None)[0]
            cost[name]['emu_a'] = float(math.exp(log_a))
            cost[name]['emu_b'] = float(b)
            items = ok
        rates[name] = _rates(items)
    return cost, rates


def _rates(items):
    def med(values):
        values = [v for v in values if math.isfinite(v)]
        return float(np.median(values)) if values else 0.0
    rows = [r for _, r in items if r['vcpu_cpu_ns'] > 0 and
            r['requests_done'] > 0]
    per_unit = {k: med([r[k] / r['requests_done'] for r in rows])
                for k in ('vcpu_slices', 'guest_ctxsw', 'guest_sched_in')}
    return dict(
        busy_s_per_unit=med([r['guest_busy_ns'] / 1e9 /
                             r['requests_done'] for r in rows]),
        busy_per_cpu=med([r['guest_busy_ns'] / r['vcpu_cpu_ns']
                          for r in rows]),
        wait_per_cpu=med([r['vcpu_wait_ns'] / r['vcpu_cpu_ns']
                          for r in rows]),
        slices=per_unit['vcpu_slices'], ctxsw=per_unit['guest_ctxsw'],
        sched_in=per_unit['guest_sched_in'])


def cell_features(cell, cost):
    """The features of each VM of a measured cell, by VM name."""
    states, lc = [], {}
    for vm in cell['vms']:
        c = cost[vm['profile']]
        if vm['profile'] == 'be':
            busy = min(vm['threads'], vm['online'])
            dv, de = float(busy), busy * c['emu_per_thread']
        else:
            rps = rps_of(vm)
            dv, de = rps * c['vcpu_s'], host_features.emulator_demand(c, rps)
            if rps:
                lc[vm['name']] = (profile_of(vm), rps)
        states.append(host_features.VmState(
            vm['name'], vm['profile'] != 'be', vm['online'],
            frozenset(vm['vcpu_cpus']), frozenset(vm['emu_cpus']), dv, de))
    spec = engine.HostSpec(cores=CORES, smt=SMT)
    states, _ = surrogate.refilled(states, lc, spec, cost)
    return host_features.features(states, spec.siblings(),
                                  spec.smt_slowdown)


def _served_all(vm, row):
    """Did the engine's VM serve what it was offered (the grids' rule)?"""
    offered = rps_of(vm) * row['seconds']
    done = row['requests_done']
    return done >= offered - 4 * math.sqrt(offered) - 0.03 * offered


def lc_rows(cell):
    """(VM, measured row, profile, engine in violation) of its LC VMs."""
    for vm, row in zip(cell['vms'], cell['measured']):
        if vm['profile'] == 'be':
            continue
        p = profile_of(vm)
        yield vm, row, p, host_mod.missed(
            p, row['p99_us'], row['requests_done'],
            rps_of(vm) * row['seconds'])


def fit(cells):
    """The surrogate's parameters from measured cells.

    Costs and rates from the random cells only: a low-load cell's
    requests pay cache refills (:func:`surrogate.refilled`), which the
    warm cost must not hold.
    """
    regular = [c for c in cells if not is_low(c['seed']) and
               not is_parked(c['seed'])]
    cost, rates = fit_costs(regular)
    parked = fit_parked(cells)
    cells = [c for c in cells if not is_parked(c['seed'])]
    _fit_quiet(cells, cost)
    _fit_wait(regular, cost, rates)
    tables = {}
    for cell in cells:
        feats = cell_features(cell, cost)
        for vm, row, p, bad in lc_rows(cell):
            t = tables.setdefault(vm['profile'], dict(
                verdict=dict(x=[], y=[]), p99=dict(x=[], y=[]),
                over=dict(x=[], y=[])))
            x = [round(v, 5) for v in surrogate.vector(feats[vm['name']])]
            t['verdict']['x'].append(x)
            t['verdict']['y'].append(1.0 if bad else 0.0)
            if row.get('over_target') is not None and row['requests_done']:
                t['over']['x'].append(x)
                t['over']['y'].append(round(
                    row['over_target'] / row['requests_done'], 5))
            if row['p99_us'] and _served_all(vm, row):
                t['p99']['x'].append(x)
                t['p99']['y'].append(round(math.log(
                    row['p99_us'] / p.qos_p99_us), 5))
    for t in tables.values():
        spread = np.array(t['verdict']['x']).std(axis=0)
        t['scale'] = [round(float(s), 5) if s > 1e-9 else 1.0
                      for s in spread]
    return dict(cost=cost, rates=rates, knn=tables, parked=parked,
                fitted_on=len(cells), cores=CORES, smt=SMT)


def _fit_quiet(cells, cost):
    """Guest time per request of a quiet VM alone (``low-alone`` cells).

    Falls back to ``vcpu_s`` for a profile without such a cell.
    """
    per = {}
    for cell in cells:
        if cell['layout'] != 'low-alone':
            continue
        for vm, row in zip(cell['vms'], cell['measured']):
            if _served(row):
                per.setdefault(vm['profile'], []).append(
                    row['guest_busy_ns'] / 1e9 / row['requests_done'])
    for name, c in cost.items():
        if name != 'be':
            c['quiet_s'] = float(np.median(per[name])) if per.get(name) \
                else c['vcpu_s']


def _fit_wait(cells, cost, rates):
    """Run delay per CPU-second over rho / (1 - rho) of the vCPU pool."""
    ratios = {}
    for cell in cells:
        feats = cell_features(cell, cost)
        for vm, row in zip(cell['vms'], cell['measured']):
            rho = feats[vm['name']]['rho_v']
            if row['vcpu_cpu_ns'] > 0 and 0.05 <= rho <= 0.97:
                ratios.setdefault(vm['profile'], []).append(
                    row['vcpu_wait_ns'] / row['vcpu_cpu_ns'] /
                    (rho / (1.0 - rho)))
    for name, values in ratios.items():
        rates[name]['wait_per_cpu'] = float(np.median(values))


def surrogate_cell(cell, params):
    """Run ``cell`` on the surrogate: (p99, violated, busy) per VM name.

    Violated: the surrogate's share of seconds in violation makes the
    cell's window of ``MEASURE`` seconds more likely in violation than
    not. Busy: its guest's busy time over the window, ns.
    """
    host = surrogate.SurrogateHost(engine.HostSpec(cores=CORES, smt=SMT),
                                   seed=cell['seed'], params=params)
    for vm in cell['vms']:
        host.add_vm(vm['name'], vm['vcpus'], profile_of(vm), rps=rps_of(vm))
        host.pin_vcpus(vm['name'], vm['vcpu_cpus'])
        host.pin_emulator(vm['name'], vm['emu_cpus'])
        host.set_online(vm['name'], vm['online'])
    host.advance(MEASURE * engine.TIME_SCALE)
    out = {}
    for vm in cell['vms']:
        p99, share = host.take_p99(vm['name'])
        out[vm['name']] = (p99, 1.0 - (1.0 - share) ** MEASURE > 0.5,
                           host.counters(vm['name']).guest_busy_ns)
    return out


def validate(cells, params):
    """Error of the surrogate against the engine on ``cells``.

    Per LC VM: whether the engine and the surrogate agree on its verdict
    (p99 over target or load not served); the p99 error where the
    engine's VM met QoS (beyond, only the verdict matters); the error
    of its guest's busy time (what the agent's utilization is made of)
    where the engine's VM served its load.
    """
    agree = total = 0
    errors, busy = [], []
    for cell in cells:
        predicted = surrogate_cell(cell, params)
        for vm, row, p, engine_bad in lc_rows(cell):
            p99, bad, seen = predicted[vm['name']]
            total += 1
            agree += engine_bad == bad
            if not engine_bad and row['p99_us'] is not None and \
                    math.isfinite(p99):
                errors.append(abs(p99 / row['p99_us'] - 1.0))
            if _served_all(vm, row) and row['guest_busy_ns']:
                busy.append(abs(seen / row['guest_busy_ns'] - 1.0))
    return dict(_agreement(total, agree, errors),
                busy_median_error=float(np.median(busy))
                if busy else None)


def _agreement(total, agree, errors):
    """The figures of a comparison: verdicts, and the p99s' errors."""
    errors = np.array(errors)
    return dict(vms=total, verdict_agreement=agree / max(1, total),
                p99_rows=len(errors),
                p99_within_15=float(np.mean(errors <= 0.15))
                if len(errors) else None,
                p99_median_error=float(np.median(errors))
                if len(errors) else None)


def remeasured(cells, workers, seed_offset=0):
    """``cells`` measured again on today's engine.

    The engine's seed is each cell's moved by ``seed_offset``; the
    layouts, loads and kinds stay the cells'.
    """
    bare = [dict({k: v for k, v in c.items() if k != 'measured'},
                 engine_seed=c['seed'] + seed_offset) for c in cells]
    return measure(bare, workers)


def engine_agreement(first, second):
    """How two engine measurements of the same cells agree.

    Per LC VM, as :func:`validate` judges the surrogate: the verdicts,
    and the p99 error of ``second`` against ``first`` where both met
    QoS.
    """
    agree = total = 0
    errors = []
    for a, b in zip(first, second):
        for (_, row_a, _, bad_a), (_, row_b, _, bad_b) in zip(
                lc_rows(a), lc_rows(b)):
            total += 1
            agree += bad_a == bad_b
            if not (bad_a or bad_b) and row_a['p99_us'] and \
                    row_b['p99_us']:
                errors.append(abs(row_b['p99_us'] / row_a['p99_us'] - 1.0))
    return _agreement(total, agree, errors)


def _result(kind, name, figures):
    return 'RESULT %s set=%s %s' % (kind, name, ' '.join(
        '%s=%s' % (k, ('%.3f' % x) if isinstance(x, float) else x)
        for k, x in figures.items()))


# The measured fields of a row, in the order the data file keeps them.
FIELDS = ('p99_us', 'vcpu_cpu_ns', 'vcpu_wait_ns', 'vcpu_slices',
          'emulator_cpu_ns', 'emulator_wait_ns', 'guest_busy_ns',
          'guest_ctxsw', 'guest_sched_in', 'requests_done',
          'requests_arrived', 'requests_dropped', 'over_target')
FIT_SEED, HELD_OUT_SEED = 1000, 5000


def compact(cells):
    """A cell as [seed, rows]: the layout is ``draw_cell(seed)``'s."""
    return [[c['seed'], [[None if r.get(f) is None else round(r[f], 1)
                          for f in FIELDS] for r in c['measured']]]
            for c in cells]


def expand(stored):
    cells = []
    for seed, rows in stored:
        cell = draw_cell(seed)
        if len(rows) != len(cell['vms']):
            raise ValueError('cell %d: %d rows for %d VMs: the data was '
                             'measured on other cells' % (
                                 seed, len(rows), len(cell['vms'])))
        cell['measured'] = [dict(zip(FIELDS, r), seconds=MEASURE *
                                 engine.TIME_SCALE) for r in rows]
        cells.append(cell)
    return cells


def load_data(path=DATA):
    """(fitted on, held out): measured cells."""
    with open(path) as f:
        data = json.load(f)
    return expand(data['fit']), expand(data['held_out'])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--collect', type=int, metavar='CELLS',
                        help='measure this many engine cells to fit on, '
                        'and half as many held out, first')
    parser.add_argument('--collect-low', type=int, metavar='CELLS',
                        help='measure this many low-load engine cells to '
                        'fit on, and half as many held out, in place of '
                        'the stored ones (draw_low_cell)')
    parser.add_argument('--collect-parked', action='store_true',
                        help='measure the parked-wait engine cells '
                        '(draw_parked_cell) in place of the stored ones')
    parser.add_argument('--workers', type=int, default=2)
    parser.add_argument('--validate', action='store_true')
    parser.add_argument('--today', action='store_true',
                        help='with --validate: measure the held-out cells '
                        'again on today\'s engine, at their seeds and at '
                        'other seeds, and judge the surrogate against '
                        'that; prints how far the stored cells are from '
                        'today\'s engine and how far two engine seeds '
                        'are from each other (minutes)')
    args = parser.parse_args(argv)
    if args.today and not args.validate:
        parser.error('--today goes with --validate')
    if args.collect:
        data = dict(cores=CORES, smt=SMT, measure=MEASURE,
                    fit=compact(collect(args.collect, FIT_SEED,
                                        args.workers)),
                    held_out=compact(collect(args.collect // 2,
                                             HELD_OUT_SEED, args.workers)))
        with open(DATA, 'w') as f:
            json.dump(data, f, separators=(',', ':'))
            f.write('\n')
    if args.collect_low:
        with open(DATA) as f:
            data = json.load(f)
        for part, first, count in (
                ('fit', LOW_FIT_SEED, args.collect_low),
                ('held_out', LOW_HELD_OUT_SEED, args.collect_low // 2)):
            data[part] = [c for c in data[part] if not is_low(c[0])] + \
                compact(collect(count, first, args.workers))
        with open(DATA, 'w') as f:
            json.dump(data, f, separators=(',', ':'))
            f.write('\n')
    if args.collect_parked:
        with open(DATA) as f:
            data = json.load(f)
        data['fit'] = [c for c in data['fit'] if not is_parked(c[0])] + \
            compact(collect(PARKED_CELLS, PARKED_SEED, args.workers))
        with open(DATA, 'w') as f:
            json.dump(data, f, separators=(',', ':'))
            f.write('\n')
    train, held = load_data()
    params = fit(train)
    with open(PARAMS, 'w') as f:
        json.dump(params, f, separators=(',', ':'), sort_keys=True)
        f.write('\n')
    if args.validate:
        for name, part in (('fit', train), ('held_out', held)):
            print(_result('surrogate_error', name, validate(part, params)))
    if args.today:
        today = remeasured(held, args.workers)
        other = remeasured(held, args.workers, REPEAT_SEED_OFFSET)
        print(_result('surrogate_error', 'held_out_today',
                      validate(today, params)))
        print(_result('stored_cells', 'held_out_vs_today',
                      engine_agreement(held, today)))
        print(_result('engine_repeat', 'held_out_other_seed',
                      engine_agreement(today, other)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
