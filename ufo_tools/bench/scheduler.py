"""Time Nova's default filters and weighers with and without UFO's.

Builds N Nova HostState objects (from ComputeNode and Service records, as
nova-scheduler does), fills ufo_nova's signal cache with one signal per
host, and times one scheduling pass (filtering, then weighing) over all
hosts: Nova's default enabled_filters and all weighers, and the same plus
UFOFilter and UFOIdlePoolWeigher. The two variants alternate, in one
process, and the medians of the repeats are compared.

By default every signal lets the host pass UFOFilter (underloaded, or
saturated with room), so that both variants weigh the same hosts and the
difference is UFO's own cost; --overloaded-fraction makes UFOFilter reject
some hosts (which then also saves weighing work).

Needs Nova in the same environment: ``pip install nova``.
"""

import datetime
import gc
import random
import statistics
import sys
import time

UFO_FILTER = 'UFOFilter'
UFO_FILTER_PATH = 'ufo_nova.filter.UFOFilter'
UFO_WEIGHER_PATH = 'ufo_nova.weigher.UFOIdlePoolWeigher'


def add_arguments(parser):
    parser.add_argument('--hosts', type=int, default=10000,
                        help='number of compute hosts (default 10000)')
    parser.add_argument('--repeats', type=int, default=11,
                        help='timed passes per variant (default 11)')
    parser.add_argument('--overloaded-fraction', type=float, default=0.0,
                        help='fraction of hosts whose signal is overloaded '
                             '(default 0: UFOFilter passes every host)')
    parser.add_argument('--noop-baseline', action='store_true',
                        help='also time a no-op filter and weigher in place '
                             'of UFO\'s: the cost of any one more filter and '
                             'weigher in Nova\'s handlers')
    parser.add_argument('--clock', choices=('cpu', 'wall'), default='cpu',
                        help='cpu (default): CPU time of this process, which '
                             'other processes on a busy machine do not '
                             'inflate; wall: elapsed time')
    parser.add_argument('--seed', type=int, default=1)


def run(args):
    if args.hosts < 2 or args.repeats < 1:
        print('ufo-bench scheduler: --hosts must be >= 2 and --repeats >= 1',
              file=sys.stderr)
        return 2
    if not 0.0 <= args.overloaded_fraction <= 1.0:
        print('ufo-bench scheduler: --overloaded-fraction must be within '
              '0..1', file=sys.stderr)
        return 2
    try:
        import nova.conf  # noqa: F401
    except ImportError as exc:
        print('ufo-bench scheduler needs the "nova" Python package in this '
              'environment (pip install nova): %s' % exc, file=sys.stderr)
        return 2
    return _run(args)


def _setup_nova():
    import nova.conf
    from nova import objects

    conf = nova.conf.CONF
    objects.register_all()
    conf([], project='nova', default_config_files=[],
         default_config_dirs=[])
    from ufo_nova import conf as ufo_conf  # noqa: F401  registers [ufo]
    conf.set_override('start_listener', False, group='ufo')
    # The services' heartbeats are set once, when the hosts are built: keep
    # ComputeFilter from finding them down during a long run.
    conf.set_override('service_down_time', 10 ** 7)
    return conf


def _hosts(n, rng):
    from nova import objects
    from nova.scheduler import host_manager

    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    cell = '00000000-0000-0000-0000-00000000ce11'
    states = []
    for i in range(n):
        name = 'compute%05d' % i
        vcpus = rng.choice((32, 64, 128))
        mem = vcpus * 4096
        compute = objects.ComputeNode(
            id=i + 1, uuid='%08x-0000-4000-8000-%012x' % (i, i), host=name,
            hypervisor_hostname=name, host_ip='10.0.%d.%d' % (i // 250,
                                                              i % 250),
            vcpus=vcpus, vcpus_used=rng.randrange(vcpus),
            memory_mb=mem, memory_mb_used=rng.randrange(mem // 2),
            free_ram_mb=mem // 2, local_gb=2048, local_gb_used=100,
            free_disk_gb=1948, disk_available_least=1900,
            running_vms=rng.randrange(40), current_workload=0,
            hypervisor_type='QEMU', hypervisor_version=7002000,
            cpu_info='{}', numa_topology=None, pci_device_pools=None,
            supported_hv_specs=[objects.HVSpec.from_list(
                ['x86_64', 'kvm', 'hvm'])],
            stats={'num_instances': '3', 'io_workload': '0'}, metrics=None,
            cpu_allocation_ratio=4.0, ram_allocation_ratio=1.0,
            disk_allocation_ratio=1.0, updated_at=now)
        service = objects.Service(
            id=i + 1, host=name, binary='nova-compute', topic='compute',
            disabled=False, forced_down=False, updated_at=now,
            created_at=now, last_seen_up=now, report_count=10,
            disabled_reason=None, uuid=compute.uuid)
        state = host_manager.HostState(name, name, cell)
        state.update(compute, service, [], {})
        states.append(state)
    return states


def _spec():
    from nova import objects

    flavor = objects.Flavor(
        id=1, flavorid='1', name='m1.bench', vcpus=4, memory_mb=4096,
        root_gb=20, ephemeral_gb=0, swap=0, extra_specs={},
        rxtx_factor=1.0, is_public=True, disabled=False, vcpu_weight=0)
    return objects.RequestSpec(
        flavor=flavor, num_instances=1,
        image=objects.ImageMeta.from_dict({'properties': {}}),
        instance_uuid='d0d0cafe-0000-4000-8000-000000000001',
        project_id='p', user_id='u', instance_group=None,
        scheduler_hints={}, ignore_hosts=None, force_hosts=None,
        force_nodes=None, availability_zone=None, pci_requests=None,
        numa_topology=None, retry=None, limits=None, is_bfv=False,
        requested_destination=None,
        security_groups=objects.SecurityGroupList(objects=[]),
        request_level_params=objects.RequestLevelParams(),
        requested_resources=[])


def _fill_cache(states, rng, overloaded_fraction):
    from ufo_agent import hostsignal
    from ufo_agent.hostsignal import payload as wire
    from ufo_nova import listener

    listener.reset()
    cache = listener.get_cache()
    for seq, state in enumerate(states, 1):
        if rng.random() < overloaded_fraction:
            kind, idle, unmet = hostsignal.OVERLOADED, 0, 2
        elif rng.random() < 0.5:
            kind, idle, unmet = hostsignal.SATURATED, 2, 0
        else:
            kind, idle, unmet = hostsignal.UNDERLOADED, rng.randint(3, 20), 0
        cache.update(wire.HostSignalPayload(
            state.host, state.nodename, hostsignal.HostSignal(
                state=kind, idle_cores=idle,
                reclaimable_cores=idle + rng.randint(0, 10),
                managed_cores=64, unmet_cores=unmet, sequence=seq,
                timestamp=time.time(), source='bench')))


def _noop_plugins():
    from nova.scheduler import filters
    from nova.scheduler import weights

    class NoopFilter(filters.BaseHostFilter):
        def host_passes(self, host_state, spec_obj):
            return True

    class NoopWeigher(weights.BaseHostWeigher):
        def weight_multiplier(self, host_state):
            return 1.0

        def _weigh_object(self, host_state, weight_properties):
            return 0.0

    return NoopFilter(), NoopWeigher()


def _pipeline(conf, with_ufo, ufo_only=False, noop=False):
    from nova.scheduler import filters
    from nova.scheduler import weights

    filter_handler = filters.HostFilterHandler()
    available = list(conf.filter_scheduler.available_filters)
    enabled = list(conf.filter_scheduler.enabled_filters)
    weight_classes = list(conf.filter_scheduler.weight_classes)
    if ufo_only:
        enabled, weight_classes = [], []
    if with_ufo:
        available.append(UFO_FILTER_PATH)
        enabled.append(UFO_FILTER)
        weight_classes.append(UFO_WEIGHER_PATH)
    by_name = {cls.__name__: cls
               for cls in filter_handler.get_matching_classes(available)}
    host_filters = [by_name[name]() for name in enabled]
    weight_handler = weights.HostWeightHandler()
    weighers = [cls() for cls in
                weight_handler.get_matching_classes(weight_classes)]
    if noop:
        noop_filter, noop_weigher = _noop_plugins()
        host_filters.append(noop_filter)
        weighers.append(noop_weigher)

    def one_pass(states, spec):
        passed = filter_handler.get_filtered_objects(
            host_filters, states, spec, 0)
        weighed = weight_handler.get_weighed_objects(weighers, passed, spec)
        return len(weighed)

    return one_pass, [type(f).__name__ for f in host_filters], [
        type(w).__name__ for w in weighers]


def _run(args):
    import logging
    logging.getLogger().setLevel(logging.WARNING)
    conf = _setup_nova()
    rng = random.Random(args.seed)
    print('Building %d HostState objects...' % args.hosts)
    states = _hosts(args.hosts, rng)
    _fill_cache(states, rng, args.overloaded_fraction)
    spec = _spec()
    without, filters_a, weighers_a = _pipeline(conf, False)
    with_ufo, filters_b, weighers_b = _pipeline(conf, True)
    print('without UFO: filters %s; %d weighers'
          % (','.join(filters_a), len(weighers_a)))
    print('with UFO:    filters %s; %d weighers (+ %s)'
          % (','.join(filters_b), len(weighers_b), weighers_b[-1]))

    ufo_alone, _, _ = _pipeline(conf, True, ufo_only=True)

    # Warm up (imports, caches), then alternate the variants so that a
    # slower or faster period of the machine hits both alike.
    kept = (without(states, spec), with_ufo(states, spec))
    ufo_alone(states, spec)
    print('hosts left after filtering: without=%d with=%d' % kept)
    if kept[0] != len(states):
        print('Nova\'s default filters dropped %d hosts: the benchmark '
              'hosts are broken' % (len(states) - kept[0]), file=sys.stderr)
        return 1
    variants = [('without', without), ('with', with_ufo),
                ('ufo_alone', ufo_alone)]
    if args.noop_baseline:
        variants.append(('noop', _pipeline(conf, False, noop=True)[0]))
    times = {name: [] for name, _ in variants}
    clock = time.process_time if args.clock == 'cpu' else time.perf_counter
    print('clock: %s time' % args.clock)
    for repeat in range(args.repeats):
        order = variants if repeat % 2 == 0 else variants[::-1]
        for name, one_pass in order:
            gc.collect()
            gc.disable()
            try:
                start = clock()
                one_pass(states, spec)
                times[name].append(clock() - start)
            finally:
                gc.enable()
        print('repeat %2d: without=%.1f ms with=%.1f ms (UFO plugins in '
              'Nova\'s handlers alone %.1f ms)'
              % (repeat + 1, times['without'][-1] * 1e3,
                 times['with'][-1] * 1e3, times['ufo_alone'][-1] * 1e3))
    med_without = statistics.median(times['without'])
    med_with = statistics.median(times['with'])
    med_alone = statistics.median(times['ufo_alone'])
    if args.noop_baseline:
        med_noop = statistics.median(times['noop'])
        noop_ratio = (med_noop - med_without) / med_without
        print('median with a no-op filter and weigher instead of UFO\'s: '
              '%.1f ms (%+.2f%%)' % (med_noop * 1e3, noop_ratio * 100))
    ratio = (med_with - med_without) / med_without
    per_host_us = (med_with - med_without) / args.hosts * 1e6
    # "alone" includes the handlers' own per-host work (WeighedHost
    # objects, sorting) that both variants share: an upper bound.
    paired = statistics.median(
        (w - wo) / wo for w, wo in zip(times['with'], times['without']))
    print('median of the per-repeat ratios (with-without)/without: %.4f'
          % paired)
    # Filtering must not change during the run (e.g. services going down).
    if (without(states, spec), with_ufo(states, spec)) != kept:
        print('hosts passing the filters changed during the run',
              file=sys.stderr)
        return 1
    print('median: without=%.1f ms with=%.1f ms; UFO plugins in Nova\'s '
          'handlers alone %.1f ms (%.2f us per host, %.1f%% of without)'
          % (med_without * 1e3, med_with * 1e3, med_alone * 1e3,
             med_alone / args.hosts * 1e6, med_alone / med_without * 100))
    print('RESULT hosts=%d ufo_overhead_ratio=%.4f per_host_us=%.3f'
          % (args.hosts, ratio, per_host_us))
    return 0
