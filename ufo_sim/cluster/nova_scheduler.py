"""Host selection by Nova's own scheduler code, over simulated hosts.

Each request goes the way a boot goes through nova-scheduler: Placement
narrows the hosts to those with room (:mod:`.placement`), then Nova's
``HostManager`` runs its enabled filters and weighers over ``HostState``
objects that Nova's own code refreshed from ``ComputeNode`` records, and
``SchedulerManager._get_sorted_hosts`` picks the host, with its
``host_subset_size`` and shuffling of equal weights. Nothing of Nova is
rewritten: only what would come from Nova's databases (cells, aggregates,
compute node records, services) is given to it from the simulator's
books.

With ``ufo=True`` ``UFOFilter`` and ``UFOIdlePoolWeigher`` are enabled as
an operator enables them (``[filter_scheduler]``), reading the real
signal cache, which :meth:`NovaScheduler.receive_signal` feeds with the
agents' real signals on the simulator's clock.

Nova's configuration is process-wide (``nova.conf.CONF``): one
:class:`NovaScheduler` configures it when built, and a process runs one
scheduler at a time.
"""

import dataclasses
import datetime
import random
import uuid as uuid_mod

from oslo_utils import timeutils

from ufo_agent.hostsignal import payload as wire
from ufo_sim.cluster import placement

UFO_FILTER = 'ufo_nova.filter.UFOFilter'
UFO_WEIGHER = 'ufo_nova.weigher.UFOIdlePoolWeigher'
_CELL = uuid_mod.UUID(int=0x5eed).hex
_UUID_NS = uuid_mod.UUID('6c3f0a52-4d7e-4b8a-9a55-1f0e8c2b7d11')


def _uuid(*parts):
    return str(uuid_mod.uuid5(_UUID_NS, '/'.join(map(str, parts))))


_nova = None
_overrides = []     # (group, name) set by the last scheduler built


def _load_nova():
    """Nova's modules, its objects registered and its options parsed."""
    global _nova
    if _nova is None:
        from nova import conf as nova_conf
        from nova import objects
        objects.register_all()
        from nova.scheduler import host_manager
        from nova.scheduler import manager
        conf = nova_conf.CONF
        from ufo_nova import conf as ufo_conf     # registers [ufo]
        assert ufo_conf.CONF is conf
        _nova = dataclasses.make_dataclass(
            'Nova', ['conf', 'objects', 'host_manager', 'manager'])(
                conf, objects, host_manager, manager)
    return _nova


@dataclasses.dataclass(frozen=True)
class Flavor:
    name: str
    vcpus: int
    memory_mb: int
    disk_gb: int = 1
    extra_specs: tuple = ()        # ((key, value), ...)

    def forbidden_traits(self):
        return frozenset(key[len('trait:'):] for key, value in
                         self.extra_specs
                         if key.startswith('trait:') and value == 'forbidden')


@dataclasses.dataclass
class HostBooks:
    """What Nova's databases hold of one compute host.

    ``cpus`` is what the libvirt driver reports as the node's VCPU
    inventory (its shared CPUs); Placement and Nova's HostState take
    the allocation ratios from the node.
    """

    name: str
    cpus: int
    memory_mb: int
    cpu_allocation_ratio: float
    ram_allocation_ratio: float = 1.0
    disk_gb: int = 10000
    traits: set = dataclasses.field(default_factory=set)
    instances: dict = dataclasses.field(default_factory=dict)  # uuid->Flavor
    failed_builds: int = 0

    @property
    def vcpus_used(self):
        return sum(f.vcpus for f in self.instances.values())

    @property
    def memory_mb_used(self):
        return sum(f.memory_mb for f in self.instances.values())

    @property
    def disk_gb_used(self):
        return sum(f.disk_gb for f in self.instances.values())


class NovaScheduler:
    """Selects hosts for boots as nova-scheduler does; books the claims.

    :param hosts: the :class:`HostBooks` of the cloud.
    :param ufo: enable UFOFilter and UFOIdlePoolWeigher.
    :param clock: the simulated time, in seconds (the signal cache's age
        of a signal and the services' heartbeats run on it).
    :param seed: the seed of Nova's random choices (shuffled equal
        weights, ``host_subset_size``).
    :param options: more ``{(group, name): value}`` overrides of Nova's
        and UFO's options.
    """

    def __init__(self, hosts, ufo=False, clock=None, seed=0, options=None):
        nova = _load_nova()
        self.nova = nova
        self.hosts = {h.name: h for h in hosts}
        self.ufo = ufo
        self.clock = clock or (lambda: 0.0)
        self.random = random.Random(seed)
        self._epoch = datetime.datetime(2026, 1, 1,
                                        tzinfo=datetime.timezone.utc)
        self._configure(options or {})
        self.host_manager = _host_manager(nova.host_manager)
        from ufo_nova import cache as signal_cache
        from ufo_nova import listener
        listener.reset()
        self.cache = signal_cache.SignalCache(
            nova.conf.ufo.signal_max_age, clock=self.clock)
        listener.use_cache(self.cache)
        self._states = {}
        self._seq = 0

    def _configure(self, options):
        """Nova's and UFO's options for this scheduler, and no others'."""
        global _overrides
        conf = self.nova.conf
        for group, name in _overrides:
            conf.clear_override(name, group=group)
        filters = list(conf.filter_scheduler.enabled_filters)
        weighers = list(conf.filter_scheduler.weight_classes)
        available = list(conf.filter_scheduler.available_filters)
        if self.ufo:
            available.append(UFO_FILTER)
            filters.append('UFOFilter')
            weighers.append(UFO_WEIGHER)
        wanted = {('filter_scheduler', 'available_filters'): available,
                  ('filter_scheduler', 'enabled_filters'): filters,
                  ('filter_scheduler', 'weight_classes'): weighers,
                  # Nova's instance tracking reads its databases.
                  ('filter_scheduler', 'track_instance_changes'): False,
                  ('ufo', 'start_listener'): False}
        wanted.update(options)
        for (group, name), value in wanted.items():
            conf.set_override(name, value, group=group)
        _overrides = list(wanted)

    # -- time ----------------------------------------------------------------
    def _utc(self):
        return self._epoch + datetime.timedelta(seconds=self.clock())

    # -- signals -------------------------------------------------------------
    def receive_signal(self, host, signal):
        """The agent of ``host`` published ``signal`` (a HostSignal)."""
        self.cache.update(wire.HostSignalPayload(host, host, signal))

    # -- requests ------------------------------------------------------------
    def select(self, instance_uuid, flavor):
        """The host Nova would boot ``flavor`` on, or None (NoValidHost)."""
        candidates = placement.candidates(
            self.hosts.values(), flavor.vcpus, flavor.memory_mb,
            flavor.disk_gb, flavor.forbidden_traits())
        if not candidates:
            return None
        spec = self._request_spec(instance_uuid, flavor)
        states = [self._state(self.hosts[name]) for name in candidates]
        with timeutils_frozen(self._utc()), _seeded(self.random):
            ranked = self.nova.manager.SchedulerManager._get_sorted_hosts(
                self, spec, states, 0)
        if not ranked:
            return None
        ranked[0].consume_from_request(spec)
        return ranked[0].host

    def claim(self, host, instance_uuid, flavor):
        """The boot landed: the host's books hold the instance."""
        self.hosts[host].instances[instance_uuid] = flavor
        self._states.pop(host, None)

    def release(self, host, instance_uuid):
        """The instance was deleted (or migrated away)."""
        self.hosts[host].instances.pop(instance_uuid, None)
        self._states.pop(host, None)

    def _request_spec(self, instance_uuid, flavor):
        objects = self.nova.objects
        nova_flavor = objects.Flavor(
            name=flavor.name, vcpus=flavor.vcpus,
            memory_mb=flavor.memory_mb, root_gb=flavor.disk_gb,
            ephemeral_gb=0, swap=0, extra_specs=dict(flavor.extra_specs))
        return objects.RequestSpec(
            instance_uuid=instance_uuid, num_instances=1,
            flavor=nova_flavor, project_id='ufo-sim', user_id='ufo-sim',
            image=objects.ImageMeta.from_dict({'properties': {}}),
            scheduler_hints={}, ignore_hosts=None, force_hosts=None,
            force_nodes=None, requested_destination=None,
            instance_group=None, retry=None, availability_zone=None,
            pci_requests=objects.InstancePCIRequests(requests=[]),
            numa_topology=None, is_bfv=False,
            request_level_params=objects.RequestLevelParams())

    def _state(self, books):
        """Nova's HostState of a host, refreshed from its compute node."""
        state = self._states.get(books.name)
        if state is None:
            state = self.nova.host_manager.HostState(
                books.name, books.name, _CELL)
            state.update(compute=self._compute_node(books),
                         service=self._service(books), aggregates=[],
                         inst_dict=self._instances(books))
            self._states[books.name] = state
        else:
            # The compute service's heartbeat keeps it up.
            state.service = self._service(books)
        return state

    def _compute_node(self, books):
        objects = self.nova.objects
        used_mb = books.memory_mb_used
        used_gb = books.disk_gb_used
        return objects.ComputeNode(
            uuid=_uuid('node', books.name), host=books.name,
            hypervisor_hostname=books.name, vcpus=books.cpus,
            vcpus_used=books.vcpus_used, memory_mb=books.memory_mb,
            memory_mb_used=used_mb, free_ram_mb=books.memory_mb - used_mb,
            local_gb=books.disk_gb, local_gb_used=used_gb,
            free_disk_gb=books.disk_gb - used_gb,
            disk_available_least=books.disk_gb - used_gb,
            host_ip='192.0.2.1', hypervisor_type='QEMU',
            hypervisor_version=8002000, cpu_info='{}',
            supported_hv_specs=[], numa_topology=None,
            pci_device_pools=objects.PciDevicePoolList(objects=[]),
            stats={'num_instances': str(len(books.instances)),
                   'io_workload': '0',
                   'failed_builds': str(books.failed_builds)},
            metrics='[]', cpu_allocation_ratio=books.cpu_allocation_ratio,
            ram_allocation_ratio=books.ram_allocation_ratio,
            disk_allocation_ratio=1.0, updated_at=self._utc())

    def _service(self, books):
        now = self._utc().replace(tzinfo=None)
        return {'host': books.name, 'binary': 'nova-compute',
                'disabled': False, 'disabled_reason': None,
                'forced_down': False, 'created_at': now,
                'updated_at': now, 'last_seen_up': now}

    def _instances(self, books):
        objects = self.nova.objects
        return {u: objects.Instance(uuid=u, host=books.name,
                                    flavor=objects.Flavor(vcpus=f.vcpus))
                for u, f in books.instances.items()}


def _host_manager(host_manager):
    """Nova's HostManager, without the databases it reads at start.

    Its filtering and weighing methods are Nova's; cells and aggregates
    are what this simulated cloud has: one cell, no aggregates.
    """

    class SimHostManager(host_manager.HostManager):
        def refresh_cells_caches(self):
            self.cells = {}
            self.enabled_cells = []

        def _init_aggregates(self):
            pass

    return SimHostManager()


class timeutils_frozen:
    """Nova's ``timeutils.utcnow()`` at the simulated instant."""

    def __init__(self, when):
        self.when = when.replace(tzinfo=None)

    def __enter__(self):
        timeutils.set_time_override(self.when)

    def __exit__(self, *exc):
        timeutils.clear_time_override()


class _seeded:
    """Nova's module-level ``random`` choices drawn from ``rng``."""

    def __init__(self, rng):
        self.rng = rng

    def __enter__(self):
        self.state = random.getstate()
        random.setstate(self.rng.getstate())

    def __exit__(self, *exc):
        self.rng.setstate(random.getstate())
        random.setstate(self.state)
