"""The cloud co-simulation: Nova's scheduler over hosts, step by step.

One run is one :class:`Policy` over one list of VM requests. At the
start of each step of ``step_s`` seconds the cloud, in time order (a
departure before an arrival at the same instant):

* deletes the VMs whose life ends in the step (``release`` in Nova's
  books, ``delete`` on the host);
* boots the VMs that arrive in the step: Nova's scheduler
  (:class:`~.nova_scheduler.NovaScheduler`) selects a host and claims it,
  or answers NoValidHost (a refused boot, never retried);
* with migration, every ``audit_interval_s`` runs the overload-relief
  Watcher audit (:mod:`.audit`) and live-migrates what it decides: a
  delete on the source and a boot on the target, Nova's books moved
  with it;

then every host runs the step with each VM's offered load from
:func:`~.workload.load_at` at the step's start (or the VM's boot), and
the UFO hosts' signals go to the scheduler's signal cache, to the
overload trait of their node (``CUSTOM_UFO_OVERLOADED``) and to the
audit's signal history.

The hosts live in shards (:class:`HostShard`), in this process or in Ray
actors, while the scheduler steps here: the hosts of a shard only see
their own boots, deletes and loads, and each host's model is seeded by
its name, so a run gives the same figures for any number of shards.
"""

import dataclasses
import uuid as uuid_mod
import zlib

from ufo_agent import extraspecs
from ufo_agent import hostsignal
from ufo_agent.publishers import placement as trait_publisher
from ufo_sim.cluster import audit as audit_mod
from ufo_sim.cluster import metrics
from ufo_sim.cluster import workload

OVERLOADED_TRAIT = trait_publisher.TRAIT
KINDS = ('default', 'dyniso', 'ufo', 'ufo-sched', 'ufo-migrate')
KIND_HELP = {
    'default': "Nova's default: shared policy, every vCPU floating",
    'dyniso': "DynIso per host, Nova's placement",
    'ufo': "UFO agents, Nova's placement",
    'ufo-sched': 'UFO agents, UFOFilter, UFOIdlePoolWeigher and the '
                 'overload trait',
    'ufo-migrate': 'ufo-sched plus live migration decided by the '
                   'ufo_overload_relief Watcher strategy',
}
RATIOS = (1.0, 2.0, 4.0, 8.0)


@dataclasses.dataclass(frozen=True)
class Policy:
    """How the cloud is run: the hosts' CPU policy and the scheduler's."""

    kind: str
    ratio: float

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError('policy %r: expected one of %s'
                             % (self.kind, ', '.join(KINDS)))
        if not self.ratio > 0:
            raise ValueError('cpu_allocation_ratio must be > 0, not %r'
                             % (self.ratio,))

    @property
    def name(self):
        return '%s@%g' % (self.kind, self.ratio)

    @property
    def host_policy(self):
        return self.kind if self.kind in ('default', 'dyniso') else 'ufo'

    @property
    def ufo_scheduler(self):
        """UFOFilter, UFOIdlePoolWeigher and the trait in the flavors."""
        return self.kind in ('ufo-sched', 'ufo-migrate')

    @property
    def migrates(self):
        return self.kind == 'ufo-migrate'


def policies(kinds=KINDS, ratios=RATIOS):
    """Every kind at every ratio, in that order."""
    return [Policy(k, float(r)) for k in kinds for r in ratios]


@dataclasses.dataclass(frozen=True)
class HostSpec:
    """A compute host: its cores, logical CPUs per core, memory.

    Its VCPU inventory (what the libvirt driver reports and Placement
    multiplies by the allocation ratio) is its logical CPUs, the CPUs its
    host model has.
    """

    name: str
    cores: int
    smt: int = 2            # logical CPUs per core, as the engine's
    memory_mb: int = 256 * 1024

    def __post_init__(self):
        if self.smt not in (1, 2) or isinstance(self.smt, bool):
            raise ValueError('smt is 1 or 2 logical CPUs per core, not %r'
                             % (self.smt,))

    @property
    def cpus(self):
        return self.cores * self.smt


def uniform_hosts(count, cores, smt=2, memory_mb=256 * 1024):
    return tuple(HostSpec('host%03d' % i, cores, smt, memory_mb)
                 for i in range(count))


@dataclasses.dataclass(frozen=True)
class CloudConfig:
    """A run's conditions, shared by the policies compared."""

    hosts: tuple                    # (HostSpec, ...)
    duration_s: float
    step_s: int = 60
    warmup_s: float = 2 * workload.HOUR_S
    seed: int = 1
    fidelity: str = 'engine'
    audit_interval_s: float = 300.0
    strategy_params: tuple = ()     # ((name, value), ...) for Watcher
    params: workload.WorkloadParams = workload.WorkloadParams()
    ufo_config: tuple = ()          # ((name, value), ...) for UFO hosts
    qos_target: bool = False        # UFO hosts in QoS-target mode

    def __post_init__(self):
        if int(self.step_s) != self.step_s or self.step_s < 1:
            raise ValueError('step_s must be a whole number of seconds '
                             '>= 1, not %r' % (self.step_s,))
        names = [h.name for h in self.hosts]
        if len(set(names)) != len(names) or not names:
            raise ValueError('hosts must be one or more, names unique')
        controller_config(self.ufo_config)     # fails here, not in a shard


def controller_config(ufo_config):
    """The UFO hosts' ControllerConfig from ``((name, value), ...)``."""
    from ufo_agent.controller import config
    try:
        return config.ControllerConfig(**dict(ufo_config))
    except TypeError as exc:
        raise ValueError('controller options: %s' % exc) from None


_UUID_NS = uuid_mod.UUID('0b3c9f4e-61a2-4f7d-8c1e-5a9d2e7b4c60')


def instance_uuid(vm_id):
    """The Nova instance UUID of a workload's VM (stable in its id)."""
    return str(uuid_mod.uuid5(_UUID_NS, vm_id))


def host_seed(seed, name):
    """The seed of a host's model: the run's seed and the host's name."""
    return (int(seed) * 1_000_003 + zlib.crc32(name.encode())) % (2 ** 31)


def flavor_of(request, policy):
    """The Nova flavor a request boots with under ``policy``."""
    from ufo_sim.cluster import nova_scheduler
    specs = [(extraspecs.CLASS, 'lc' if request.lc else 'be')]
    if policy.ufo_scheduler:
        specs.append(('trait:%s' % OVERLOADED_TRAIT, 'forbidden'))
    return nova_scheduler.Flavor(
        name='v%d.m%d' % (request.vcpus, request.memory_mb),
        vcpus=request.vcpus, memory_mb=request.memory_mb,
        extra_specs=tuple(sorted(specs)))


BOOT = 'boot'
START_TIMEOUT_S = 300.0
DELETE = 'delete'


class HostShard:
    """Some of the cloud's hosts under one policy; a Ray actor or local.

    :meth:`advance` applies the step's boots and deletes in the order
    given, runs every host for the step and returns what each did.
    """

    def __init__(self, specs, host_policy, seed, fidelity, params,
                 factory=None, ufo_config=(), qos_target=False):
        if factory is None:
            from ufo_sim.cluster import host as host_mod
            factory = host_mod.ClusterHost
        self.params = params
        controller = controller_config(ufo_config)
        self.hosts = {s.name: factory(
            s.name, s.cores, s.smt, host_policy, host_seed(seed, s.name),
            fidelity=fidelity, config=controller, qos_target=qos_target)
            for s in specs}
        self.requests = {name: {} for name in self.hosts}

    def ready(self):
        return sorted(self.hosts)

    def advance(self, ops, t, seconds):
        """``{host: (HostReport, signal or None)}`` for the step at ``t``."""
        for op, host, arg in ops:
            if op == BOOT:
                self.hosts[host].boot(arg)
                self.requests[host][arg.vm_id] = arg
            else:
                self.hosts[host].delete(arg)
                del self.requests[host][arg]
        out = {}
        for name in sorted(self.hosts):
            loads = {vm_id: workload.load_at(r, max(t, r.arrive_s),
                                             self.params)
                     for vm_id, r in self.requests[name].items()}
            step = self.hosts[name].step(seconds, loads)
            out[name] = (HostReport.of(step), self.hosts[name].signal())
        return out


@dataclasses.dataclass(frozen=True)
class HostReport:
    """The figures of a host's step the cloud keeps (small to ship)."""

    lc_violation_s: float
    lc_seconds: float
    changes: int
    held_cpus: float
    be_work_s: float = 0.0
    be_asked_s: float = 0.0
    # ((vm_id, violation seconds), ...) of the LC VMs with any.
    violations: tuple = ()

    @classmethod
    def of(cls, step):
        return cls(float(step.violation_s), float(step.lc_seconds),
                   sum(v.vcpu_changes for v in step.vms.values()),
                   step.held_cpus_mean, float(step.be_work_s),
                   float(step.be_asked_s),
                   tuple((vm_id, float(v.violation_s))
                         for vm_id, v in sorted(step.vms.items())
                         if v.violation_s))


class LocalShards:
    """The shards in this process (``workers = 0``)."""

    def __init__(self, groups, policy, config, factory=None):
        self.shards = [HostShard(g, policy.host_policy, config.seed,
                                 config.fidelity, config.params, factory,
                                 config.ufo_config, config.qos_target)
                       for g in groups]
        self.count = len(groups)

    def advance(self, ops_by_shard, t, seconds):
        out = {}
        for shard, ops in zip(self.shards, ops_by_shard):
            out.update(shard.advance(ops, t, seconds))
        return out

    def close(self):
        self.shards = []


class RayShards:
    """The shards as Ray actors, one CPU each, stepped in parallel."""

    def __init__(self, groups, policy, config, ray, factory=None):
        self.ray = ray
        actor = ray.remote(num_cpus=1, max_restarts=0)(HostShard)
        self.actors = [actor.remote(g, policy.host_policy, config.seed,
                                    config.fidelity, config.params, factory,
                                    config.ufo_config, config.qos_target)
                       for g in groups]
        self.count = len(groups)
        try:
            ray.get([a.ready.remote() for a in self.actors],
                    timeout=START_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise RuntimeError(
                '%d host shards did not start in %.0f s: each takes a CPU '
                'of the Ray cluster (%s CPUs)' % (
                    len(groups), START_TIMEOUT_S,
                    ray.cluster_resources().get('CPU', 0))) from None

    def advance(self, ops_by_shard, t, seconds):
        out = {}
        for part in self.ray.get([
                a.advance.remote(ops, t, seconds)
                for a, ops in zip(self.actors, ops_by_shard)]):
            out.update(part)
        return out

    def close(self):
        for actor in self.actors:
            self.ray.kill(actor)
        self.actors = []


def shard_groups(hosts, workers):
    """The hosts dealt over ``max(1, workers)`` shards, round robin."""
    count = max(1, min(int(workers), len(hosts)))
    return [tuple(hosts[i::count]) for i in range(count)]


def open_shards(config, policy, workers, factory=None):
    """Shards for a run: Ray actors when ``workers`` > 0, else local.

    ``factory`` builds a host as :class:`~.host.ClusterHost` does (the
    default).
    """
    groups = shard_groups(config.hosts, workers)
    if workers <= 0:
        return LocalShards(groups, policy, config, factory)
    from ufo_sim.experiments import parallel
    return RayShards(groups, policy, config, parallel.start_ray(workers),
                     factory)


class Cloud:
    """One policy's run over a list of requests; see the module docstring.

    :param shards: :class:`LocalShards` or :class:`RayShards` built for
        this policy and config.
    :param auditor: an open :class:`~.audit.Auditor` when the policy
        migrates.
    """

    def __init__(self, config, policy, requests, shards, auditor=None):
        from ufo_sim.cluster import nova_scheduler
        self.config, self.policy, self.shards = config, policy, shards
        self.auditor = auditor
        if policy.migrates and auditor is None:
            raise ValueError('policy %s migrates: it needs an auditor'
                             % policy.name)
        self.now = 0.0
        self.books = [nova_scheduler.HostBooks(
            h.name, h.cpus, h.memory_mb, policy.ratio)
            for h in config.hosts]
        self.scheduler = nova_scheduler.NovaScheduler(
            self.books, ufo=policy.ufo_scheduler, clock=lambda: self.now,
            seed=config.seed)
        self.shard_of = {}
        for i, group in enumerate(shard_groups(config.hosts, shards.count)):
            for h in group:
                self.shard_of[h.name] = i
        self.requests = sorted(requests, key=lambda r: (r.arrive_s, r.vm_id))
        self.placed = {}            # vm_id -> host
        self.by_id = {r.vm_id: r for r in self.requests}
        self.histories = {h.name: [] for h in config.hosts}
        # The audit looks back sustain_s + max_age_s: keep at least that.
        strategy = dict(config.strategy_params)
        self.keep_s = max(workload.HOUR_S,
                          float(strategy.get('sustain_s', 300.0)) +
                          float(strategy.get('max_age_s', 120.0)))
        self.last_migrated = {}
        self.series = metrics.Series(policy.name, len(config.hosts),
                                     config.step_s, config.warmup_s)
        self.migrated = []          # (t, vm_id, source, destination)

    def run(self):
        """Simulate ``duration_s``; return the :class:`metrics.Series`."""
        step = int(self.config.step_s)
        departures = sorted(self.requests, key=lambda r: (r.depart_s,
                                                          r.vm_id))
        next_arrival = next_departure = 0
        next_audit = self.config.audit_interval_s
        while self.now < self.config.duration_s:
            t, end = self.now, self.now + step
            ops = [[] for _ in range(self.shards.count)]
            refused = migrations = 0
            # Departures before arrivals at the same instant: in a step
            # they are applied first, the arrivals then in time order.
            while (next_departure < len(departures)
                   and departures[next_departure].depart_s < end):
                r = departures[next_departure]
                next_departure += 1
                host = self.placed.pop(r.vm_id, None)
                if host is not None:
                    self.scheduler.release(host, instance_uuid(r.vm_id))
                    ops[self.shard_of[host]].append((DELETE, host, r.vm_id))
            while (next_arrival < len(self.requests)
                   and self.requests[next_arrival].arrive_s < end):
                r = self.requests[next_arrival]
                next_arrival += 1
                if r.depart_s < end:
                    continue    # born and gone within the step
                host = self._place(r)
                if host is None:
                    refused += 1
                else:
                    ops[self.shard_of[host]].append((BOOT, host, r))
            if self.policy.migrates and t >= next_audit:
                next_audit += self.config.audit_interval_s
                migrations = self._migrate(ops)
            reports = self.shards.advance(ops, t, step)
            self.now = end
            self._signals(reports)
            self._record(t, reports, refused, migrations,
                         demand=next_arrival - next_departure)
        return self.series

    def _place(self, request):
        flavor = flavor_of(request, self.policy)
        uuid = instance_uuid(request.vm_id)
        host = self.scheduler.select(uuid, flavor)
        if host is not None:
            self.scheduler.claim(host, uuid, flavor)
            self.placed[request.vm_id] = host
        return host

    def _signals(self, reports):
        for host in sorted(reports):
            signal = reports[host][1]
            if signal is None:
                continue
            # On the cloud's clock: the end of the step just run.
            signal = dataclasses.replace(signal, timestamp=self.now)
            self.scheduler.receive_signal(host, signal)
            books = self.scheduler.hosts[host]
            overloaded = signal.state == hostsignal.OVERLOADED
            if overloaded != (OVERLOADED_TRAIT in books.traits):
                if overloaded:
                    books.traits.add(OVERLOADED_TRAIT)
                else:
                    books.traits.discard(OVERLOADED_TRAIT)
            history = self.histories[host]
            history.append(signal)
            horizon = self.now - self.keep_s
            while history and history[0].timestamp < horizon:
                history.pop(0)

    def _migrate(self, ops):
        """Run the Watcher audit; apply its moves; how many."""
        nodes = tuple(audit_mod.Node(b.name, b.cpus, b.cpu_allocation_ratio,
                                     b.memory_mb) for b in self.books)
        by_uuid = {instance_uuid(vm_id): vm_id for vm_id in self.placed}
        guests = tuple(audit_mod.Guest(
            instance_uuid(vm_id), host, self.by_id[vm_id].vcpus,
            self.by_id[vm_id].memory_mb, self.by_id[vm_id].lc)
            for vm_id, host in sorted(self.placed.items()))
        moves = self.auditor.audit(audit_mod.Request(
            now=self.now, nodes=nodes, guests=guests,
            histories={h: list(s) for h, s in self.histories.items() if s},
            instance_cores={}, last_migrated=dict(self.last_migrated),
            params=dict(self.config.strategy_params)))
        done = 0
        for uuid, source, destination in moves:
            vm_id = by_uuid.get(uuid)
            if vm_id is None or self.placed[vm_id] != source:
                continue
            request = self.by_id[vm_id]
            flavor = flavor_of(request, self.policy)
            self.scheduler.release(source, uuid)
            self.scheduler.claim(destination, uuid, flavor)
            self.placed[vm_id] = destination
            ops[self.shard_of[source]].append((DELETE, source, vm_id))
            ops[self.shard_of[destination]].append(
                (BOOT, destination, request))
            self.last_migrated[uuid] = self.now
            self.migrated.append((self.now, vm_id, source, destination))
            done += 1
        return done

    def _record(self, t, reports, refused, migrations, demand):
        # demand: the VMs that asked to be alive through the step,
        # refused or not (every departure so far had arrived).
        lc_hosted = sum(1 for vm_id in self.placed if self.by_id[vm_id].lc)
        self.series.add(
            t=t, hosted=len(self.placed), lc_hosted=lc_hosted,
            demand=demand,
            # Summed in host order: the same floats for any sharding.
            lc_violation_s=sum(reports[h][0].lc_violation_s
                               for h in sorted(reports)),
            changes=sum(reports[h][0].changes for h in sorted(reports)),
            refused=refused, migrations=migrations,
            held_cpus=sum(reports[h][0].held_cpus for h in sorted(reports)),
            be_work_s=sum(reports[h][0].be_work_s for h in sorted(reports)),
            be_asked_s=sum(reports[h][0].be_asked_s
                           for h in sorted(reports)),
            violations=[(h,) + v for h in sorted(reports)
                        for v in reports[h][0].violations])


def run(config, policy_list, requests, workers=2, factory=None):
    """Every policy over the same requests: ``{policy name: Series}``.

    Policies run one after the other (Nova's configuration is
    process-wide); each on fresh hosts, sharded over ``workers`` Ray
    actors (0: in this process). The Watcher audit, when a policy
    migrates, runs in a child interpreter.
    """
    out = {}
    auditor = None
    try:
        for policy in policy_list:
            if policy.migrates and auditor is None:
                auditor = audit_mod.Auditor().__enter__()
            shards = open_shards(config, policy, workers, factory)
            try:
                out[policy.name] = Cloud(config, policy, requests, shards,
                                         auditor).run()
            finally:
                shards.close()
    finally:
        if auditor is not None:
            auditor.__exit__(None, None, None)
    return out
