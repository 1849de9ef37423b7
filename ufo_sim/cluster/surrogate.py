"""A fast host model fitted from the engine: the cloud's hosts at scale.

:class:`SurrogateHost` has the face of :class:`ufo_sim.engine.SimHost`
that :class:`~ufo_sim.driver.SimDriver` and
:class:`~ufo_sim.cluster.host.ClusterHost` use (add, stop, load, pin,
hotplug, advance, counters), so the real agent runs over it unchanged.
What it computes per interval, from its state held constant over the
interval (pins, online vCPUs, offered loads):

* each VM's demand: an LC VM's requests times its profile's vCPU and
  emulator CPU per request, a BE VM's busy threads (at most its online
  vCPUs); SCHED_IDLE threads (BE soak) take only what is left;
* each pool's load (:mod:`ufo_sim.cluster.host_features`); an overloaded
  pool serves each thread group its fair share by thread, as CFS does
  (a light group all it asks), the rest is not served;
* the counters the agent reads (CPU, run delay, guest busy time,
  context switches and switches into threads, requests), each per unit
  of work as fitted;
* each LC VM's p99 and verdict from the engine's measured cells
  nearest in those features (:func:`predict`), per profile.

There are no latencies to take: :meth:`SurrogateHost.take_p99` gives the
last interval's p99. CPU hotplug takes no time. The fit and its error
against the engine: :mod:`ufo_sim.cluster.surrogate_fit` and the
research record of 2026-12-02 (cluster hosts).
"""

import dataclasses
import json
import math
import os

import numpy as np

from ufo_sim.cluster import host_features
from ufo_sim.engine import host as engine_host
from ufo_sim.engine import spec as engine_spec
from ufo_sim.engine.spec import HostSpec

PARAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      'surrogate_params.json')
# Loads (and batch pressure) above this count as this much: all are
# overloads by then.
_CAP = 3.0
# Run delay grows as rho / (1 - rho), with rho held below this.
_CLIP = 0.97
# Neighbours weighed for the verdict and for the p99 (chosen by two-fold
# cross-validation on the fitted cells, see the research record).
K_VERDICT = 7
K_P99 = 3
# Below this many requests a second, a second's p99 is its slowest
# request or next to it.
FEW_REQUESTS = 100


def vector(feats):
    """A VM's features as the nearest-neighbour model compares them."""
    return [min(feats[n], _CAP) if n in ('u', 'rho_v', 'rho_e', 'be')
            else feats[n] for n in host_features.NAMES]


def _nearest(x, y, z, k):
    """Inverse-distance weighted mean of the k nearest rows' values."""
    dist = np.sqrt(((x - z) ** 2).sum(axis=1))
    idx = np.argsort(dist)[:k]
    w = 1.0 / (dist[idx] + 1e-6)
    return float((w * y[idx]).sum() / w.sum())


# Parameters as arrays, by (id of the parameters, profile name).
_PREPARED = {}


def _prepared(params, name):
    key = (id(params), name)
    if key not in _PREPARED:
        model = params['knn'][name]
        scale = np.array(model['scale'])
        _PREPARED[key] = (scale, {
            part: (np.array(model[part]['x']) / scale,
                   np.array(model[part]['y']))
            for part in ('verdict', 'p99', 'over') if model.get(part, {})
            .get('x')}, params)
    return _PREPARED[key]


def predict(params, profile, feats, per_second=math.inf):
    """(p99 in simulated us, share of seconds in violation) of an LC VM.

    Both from the engine's measured cells nearest in the features
    ``feats`` (scaled by their spread): the p99 is the weighted
    geometric mean of ``K_P99`` that served their load. With
    ``per_second`` requests a second (real seconds) or more than
    ``FEW_REQUESTS``, the share is 1 or 0 by the weighted vote of
    ``K_VERDICT`` cells; with fewer, a second's p99 is about its slowest
    request, so a second is in violation when any request is over the
    target: ``1 - exp(-q * per_second)`` for Poisson arrivals, ``q`` the
    share of requests over the target in the ``K_VERDICT`` nearest
    cells that measured it. A parked VM (one usable vCPU) whose CPUs
    others' work fills takes ``q`` from the parked-wait cells instead,
    by the busy threads it shares its CPU with (:func:`_threads_beside`):
    with one, the woken vCPU mostly runs at once; with two it queues
    behind one of them.
    """
    scale, tables, _ = _prepared(params, profile.name)
    z = np.array(vector(feats)) / scale
    p99 = profile.qos_p99_us * math.exp(
        _nearest(*tables['p99'], z, K_P99))
    parked = params.get('parked', {}).get(profile.name)
    if per_second < FEW_REQUESTS and parked and \
            _parked_among_busy(feats):
        over = parked[_threads_beside(feats['others_per_cpu'])]
        return p99, 1.0 - math.exp(-over * per_second)
    if per_second < FEW_REQUESTS and 'over' in tables:
        over = _nearest(*tables['over'], z, K_VERDICT)
        return p99, 1.0 - math.exp(-over * per_second)
    return p99, float(_nearest(*tables['verdict'], z, K_VERDICT) > 0.5)


# Sums of demands in CPUs' worth are whole numbers up to this.
_WHOLE = 1e-6


def _busy_time(work, served, feats, online, cpus, dt):
    """Seconds a VM's guest sees its vCPUs busy while doing ``work``.

    Work is counted at a lone thread's pace. On CPUs of its own that do
    not serve all of it (``served`` under 1, no other VM's vCPU work
    there) its usable vCPUs never halt, and the guest counts each busy
    the whole interval however slowly its SMT sibling lets it run, as
    the engine's guest does: two vCPUs on one core read 200 %, not the
    133 % of work the core serves, which kept the agent from growing
    such a VM.
    """
    if served < 1.0 and feats['others_per_cpu'] < _WHOLE:
        return max(work, max(1, min(online, cpus)) * dt)
    return work


def _parked_among_busy(feats):
    """One usable vCPU, and others' work fills every CPU it may use."""
    return feats['log_n'] == 0.0 and feats['free'] < _WHOLE


def _threads_beside(per_cpu):
    """Busy threads on a parked vCPU's CPU, as the parked cells key it.

    The engine keeps a woken vCPU on its last CPU while none is idle,
    and puts it where it was re-pinned on the least loaded one: the
    fewer of the two whole numbers around ``per_cpu``.
    """
    return '1' if per_cpu < 2.0 - _WHOLE else '2'


def queued(p99, share, pool_load, wait, target):
    """(p99, share of seconds in violation) with a saturated pool's wait.

    ``pool_load``: the load the VM's emulator threads meet in a shared
    pool (:func:`~ufo_sim.cluster.host_features.emulator_pool_load`).
    Over 1 every CPU of the pool is busy: a woken emulator thread runs
    only when a running one's slice ends, so a request waits at least
    ``wait`` (the host's shortest slice) on its way in or out, and its
    second misses QoS when that puts the p99 over ``target``. The
    fitted cells' VMs in such pools are so judged by their features
    already; this holds for pools of many VMs the cells do not have.
    """
    if pool_load <= 1.0:
        return p99, share
    p99 = p99 + wait
    return p99, 1.0 if p99 > target else share


def refilled(states, lc, spec, cost):
    """``states`` with each LC VM's requests paying their cache refills.

    ``lc``: (profile, requests per second) by VM name; ``cost``: the
    fitted costs by profile: ``vcpu_s`` a request's guest time,
    ``quiet_s`` that of a quiet VM alone on warm caches. A request that
    finds its vCPU halted (a share ``1 - u`` of them) wakes it for its
    first round's work; what the wake adds is
    :func:`~ufo_sim.cluster.host_features.wake_refill` with the host's
    cache parameters and the profile's footprint. Returns the states
    and, by VM name, a request's guest time over ``vcpu_s``.
    """
    crowd = host_features.crowding(states, spec.siblings())
    out, factor = [], {}
    for state in states:
        if state.name in lc and state.vcpu_demand:
            profile, rps = lc[state.name]
            base = cost[profile.name]['vcpu_s']
            others, cores = crowd[state.name]
            usable = max(1, min(state.online, len(state.vcpu_cpus)))
            halted = max(0.0, 1.0 - state.vcpu_demand / usable)
            extra = halted * host_features.wake_refill(
                cost[profile.name]['quiet_s'] / profile.rounds,
                spec.cache_refill * profile.cache_footprint,
                spec.cold_slowdown, spec.cache_decay, usable / rps,
                others, cores)
            if extra:
                factor[state.name] = 1.0 + extra / base
                state = dataclasses.replace(
                    state, vcpu_demand=rps * (base + extra))
        out.append(state)
    return out, factor


def load_params(path=PARAMS):
    with open(path) as f:
        return json.load(f)


@dataclasses.dataclass
class _Vm:
    name: str
    vcpus: int
    profile: object
    rps: float = 0.0
    online: int = 0
    vcpu_cpus: frozenset = frozenset()
    emu_cpus: frozenset = frozenset()
    idle: bool = False
    stopped: bool = False
    counts: dict = dataclasses.field(default_factory=dict)
    p99: float = math.nan
    violated: float = 0.0


_COUNTERS = [f.name for f in dataclasses.fields(engine_host.VmCounters)]


class SurrogateHost:
    """A host whose VMs' QoS and counters come from the fitted model."""

    def __init__(self, spec=None, seed=0, params=None):
        self.spec = spec or HostSpec()
        self.seed = int(seed)
        self.params = params if params is not None else _default_params()
        self.siblings = self.spec.siblings()
        self.numa_of_cpu = self.spec.numa_of_cpu()
        self.little = self.spec.little_cpus()
        self._now = 0.0
        self._vms = {}
        self._features = None
        self._predicted = {}
        self._refill = {}
        self._pool_load = {}

    @property
    def now(self):
        return self._now

    @property
    def cpus(self):
        return tuple(range(self.spec.cpus))

    def _vm(self, vm):
        try:
            return self._vms[vm]
        except KeyError:
            raise KeyError('no VM %r' % (vm,)) from None

    def add_vm(self, name, vcpus, profile, rps=0.0):
        if name in self._vms:
            raise ValueError('VM %r exists' % (name,))
        every = frozenset(self.cpus)
        self._vms[name] = _Vm(name, int(vcpus), profile, online=int(vcpus),
                              vcpu_cpus=every, emu_cpus=every,
                              counts={f: 0 for f in _COUNTERS})
        self._features = None
        if rps:
            self.set_rps(name, rps)
        return name

    def profile(self, vm):
        return self._vm(vm).profile

    def stop_vm(self, vm):
        self._vm(vm).stopped = True
        self._vm(vm).rps = 0.0
        self._features = None

    def set_rps(self, vm, rps):
        v = self._vm(vm)
        if not v.profile.is_lc:
            return
        if v.stopped:
            raise ValueError('the VM is stopped')
        v.rps = float(rps)
        self._features = None

    def pin_vcpus(self, vm, cpus):
        self._pin(vm, 'vcpu_cpus', cpus)

    def pin_emulator(self, vm, cpus):
        self._pin(vm, 'emu_cpus', cpus)

    def _pin(self, vm, field, cpus):
        cpus = frozenset(int(c) for c in cpus)
        if not cpus or not cpus <= frozenset(self.cpus):
            raise ValueError('bad CPU set %s' % sorted(cpus))
        setattr(self._vm(vm), field, cpus)
        self._features = None

    def set_vcpus_idle(self, vm, idle):
        self._vm(vm).idle = bool(idle)
        self._features = None

    def set_online(self, vm, n, hotplug=False):
        v = self._vm(vm)
        v.online = max(1, min(v.vcpus, int(n)))
        self._features = None
        return v.online

    def online(self, vm):
        return self._vm(vm).online

    def counters(self, vm):
        v = self._vm(vm)
        counts = dict(v.counts)
        counts['online_vcpus'] = v.online
        return engine_host.VmCounters(**counts)

    def take_p99(self, vm):
        """The last interval's (p99 us, share of seconds in violation).

        The share is 0 or 1 but for VMs of few requests a second (see
        :func:`predict`).
        """
        v = self._vm(vm)
        return v.p99, v.violated

    # -- the model -----------------------------------------------------------
    def _demands(self, v):
        """(vCPU, emulator) demand of a VM, in CPUs."""
        p = v.profile
        if v.stopped:
            return 0.0, 0.0
        cost = self.params['cost'][p.name]
        if p.is_lc:
            return v.rps * cost['vcpu_s'], \
                host_features.emulator_demand(cost, v.rps)
        busy = min(p.threads, v.online)
        return float(busy), busy * cost['emu_per_thread']

    def _states(self):
        """The features' view of the running VMs (idle class apart)."""
        every, lc = [], {}
        for v in self._vms.values():
            dv, de = self._demands(v)
            every.append(host_features.VmState(
                v.name, v.profile.is_lc, v.online, v.vcpu_cpus, v.emu_cpus,
                dv, de))
            if v.profile.is_lc and dv:
                lc[v.name] = (v.profile, v.rps)
        every, self._refill = refilled(every, lc, self.spec,
                                       self.params['cost'])
        states = [s for s in every if not self._vms[s.name].idle]
        idle = [s for s in every if self._vms[s.name].idle]
        return states, idle

    def _evaluate(self):
        states, idle = self._states()
        slowdown = self.spec.smt_slowdown
        feats = host_features.features(states, self.siblings, slowdown)
        fair = host_features.served(states, self.siblings, slowdown)
        everything = host_features.features(states + idle, self.siblings,
                                            slowdown)
        out = {}
        soaking = {state.name for state in idle}
        for state in states + idle:
            # SCHED_IDLE threads (BE soak) take what the normal threads
            # leave: they see the whole pool, the normal ones do not see
            # them.
            if state.name in soaking:
                f = everything[state.name]
                served = min(1.0, 1.0 / max(f['rho_v'], 1e-9),
                             1.0 / max(f['u'], 1e-9))
            else:
                f = feats[state.name]
                served = min(1.0, fair[state.name])
            if not state.vcpu_demand:
                served = 1.0
            emu_served = min(1.0, 1.0 / max(f['rho_e'], 1e-9)) \
                if state.emu_demand else 1.0
            out[state.name] = (state, f, served, emu_served)
        self._features = out
        self._pool_load = host_features.emulator_pool_load(
            states + idle, fair, self.siblings, slowdown)
        # A VM's p99 and verdict hold as long as its features do.
        self._predicted = {}

    def advance(self, seconds):
        """Run ``seconds`` simulated seconds with the state held."""
        if self._features is None:
            self._evaluate()
        dt = float(seconds)
        rates = self.params['rates']
        for name, (state, f, served, emu_served) in self._features.items():
            v = self._vms[name]
            p = v.profile
            c = v.counts
            r = rates[p.name]
            busy = state.vcpu_demand * served * dt
            seen = _busy_time(busy, served, f, v.online,
                              len(state.vcpu_cpus), dt)
            cpu = min(seen / max(r['busy_per_cpu'], 1e-3), v.online * dt)
            emu = state.emu_demand * emu_served * dt
            rho = min(f['rho_v'], _CLIP)
            rho_e = min(f['rho_e'], _CLIP)
            # Work done in requests (LC) or batch chunks: cache refills
            # lengthen a request, not its switches.
            work = busy / max(r['busy_s_per_unit'] *
                              self._refill.get(name, 1.0), 1e-12)
            c['vcpu_cpu_ns'] += int(cpu * 1e9)
            c['vcpu_guest_ns'] += int(cpu * 1e9)
            c['guest_busy_ns'] += int(seen * 1e9)
            c['vcpu_wait_ns'] += int(cpu * r['wait_per_cpu'] * rho /
                                     (1.0 - rho) * 1e9)
            c['emulator_cpu_ns'] += int(emu * 1e9)
            c['emulator_wait_ns'] += int(emu * r['wait_per_cpu'] * rho_e /
                                         (1.0 - rho_e) * 1e9)
            c['vcpu_slices'] += int(work * r['slices'])
            c['host_ctxsw'] += int(work * r['slices'])
            c['guest_ctxsw'] += int(work * r['ctxsw'])
            c['guest_sched_in'] += int(work * r['sched_in'])
            if p.is_lc:
                arrived = int(round(v.rps * dt))
                c['requests_arrived'] += arrived
                c['requests_done'] += int(round(arrived * served))
                if arrived and name not in self._predicted:
                    self._predicted[name] = queued(
                        *predict(self.params, p, f,
                                 v.rps * engine_spec.TIME_SCALE),
                        self._pool_load.get(name, 0.0),
                        self.spec.sched_min_granularity * 1e6,
                        p.qos_p99_us)
                v.p99, share = self._predicted[name] if arrived else \
                    (math.nan, 0.0)
                v.violated = share if arrived else 0.0
            else:
                c['requests_done'] += int(work)
        self._now += dt

    def advance_to(self, when):
        """As :meth:`ufo_sim.engine.SimHost.advance_to`."""
        if when > self._now:
            self.advance(when - self._now)


_DEFAULT = None


def _default_params():
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = load_params()
    return _DEFAULT
