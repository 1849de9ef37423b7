"""Prometheus metrics and the JSON status, served on localhost.

``GET /metrics`` is the Prometheus exposition (text format, or
OpenMetrics when the scraper asks for it) made by ``prometheus_client``;
``GET /status`` is the snapshot as JSON (what ``ufo-status`` prints).

The server only reads the latest snapshot (:mod:`.snapshot`), never the
agent: :class:`SnapshotCollector` turns it into metric families at each
scrape. The agent counts events where they happen (``tick_errors``, the
enforcer's ``errors`` and ``rollbacks``, ...); the snapshot carries the
totals, which are exposed as counters. Guests are labelled by instance
UUID only: display names are the tenant's, and change.
"""

import http.server
import json
import logging
import threading

from prometheus_client import core
from prometheus_client import exposition
from prometheus_client import process_collector
from prometheus_client import registry as registry_mod

from ufo_agent.channel import latency
from ufo_agent.controller import plan as plan_mod
from ufo_agent import hostsignal
from ufo_agent.service import acks
from ufo_agent.service import enforcer
from ufo_agent.service import sampler
from ufo_agent.service import snapshot as snapshot_mod

LOG = logging.getLogger(__name__)


def _held(held):
    """Cores and guests kept out of every pool, by reason (0 when none)."""
    cores = {reason: set() for reason in snapshot_mod.HELD_REASONS}
    guests = dict.fromkeys(snapshot_mod.HELD_REASONS, 0)
    for row in held:
        cores.setdefault(row['reason'], set()).update(row['cores'])
        if row['owner'] != 'emulator':
            guests[row['reason']] = guests.get(row['reason'], 0) + 1
    family = core.GaugeMetricFamily(
        'ufo_held_cores', 'Physical cores no pool may take, by reason: '
        'threads of guests whose libvirt calls hang, or of running domains '
        'the agent could not adopt.', labels=['reason'])
    for reason in sorted(cores):
        family.add_metric([reason], len(cores[reason]))
    yield family
    family = core.GaugeMetricFamily(
        'ufo_held_guests', 'Guests whose cores are held, by reason (see '
        'ufo_held_cores).', labels=['reason'])
    for reason in sorted(guests):
        family.add_metric([reason], guests[reason])
    yield family


def _from_micro(value):
    return value / 1e6


def _ratio(percent):
    return percent / 100.0


# name, help, snapshot key under 'pools' (None: the snapshot itself), key.
_HOST_GAUGES = (
    ('ufo_managed_cores', 'Physical cores ufo-agent manages.',
     'pools', 'managed_cores'),
    ('ufo_emulator_pool_utilization_ratio',
     'Busy fraction of the emulator pool over the last tick (0-1).',
     'pools', 'emulator_util'),
    ('ufo_overloaded',
     '1 when the idle pool could not supply what the other pools needed.',
     'pools', 'overloaded'),
    ('ufo_shortfall_cores', 'Cores the pools needed and did not get.',
     'pools', 'shortfall_cores'),
    ('ufo_cores_saved',
     'Cores the guests would hold at flavor size, minus the cores their '
     'vCPU pools hold.', None, 'cores_saved'),
    ('ufo_last_tick_duration_seconds', 'Duration of the last tick.',
     None, 'tick_seconds'),
    ('ufo_dry_run', '1 when the agent only computes plans (dry run).',
     None, 'dry_run'),
)

_POOLS = (('vcpu', 'vcpu_cores'), ('emulator', 'emulator_cores'),
          ('idle', 'idle_cores'))

_HOST_COUNTERS = (
    ('ufo_tick_errors_total',
     'Unexpected errors in ticks, logged with a traceback: each cost one '
     'guest its tick or abandoned a tick.', 'tick_errors'),
    ('ufo_invariant_violations_total',
     'Controller plans that broke an invariant and were not applied (the '
     'last good pins were kept).', 'invariant_violations'),
    ('ufo_rollbacks_total',
     'vCPU targets rolled back: a guest did not acknowledge its target '
     'within [agent] ack_timeout and was asked for every vCPU again (its '
     'channel is host-only for a backoff).', 'rollbacks'),
    ('ufo_pin_repairs_total',
     'Guests whose live pins the drift check found changed behind '
     'ufo-agent (a vCPU plugged elsewhere, a re-pin by someone else) and '
     'had pinned again.', 'pin_repairs'),
    ('ufo_host_only_fallbacks_total',
     'Guest signals that fell back from the guest module\'s reports to '
     'host-only measurement (invalid, stale or contradicted page).',
     'host_only_fallbacks'),
)

# name, help, VmStatus field, scale to base units.
_VM_GAUGES = (
    ('ufo_vm_vcpus', 'vCPUs of the guest (its flavor).', 'vcpus', None),
    ('ufo_vm_cores', 'Physical cores of the guest\'s vCPU pool.', 'cores',
     None),
    ('ufo_vm_wanted_cores', 'Cores the predictor asked for.',
     'wanted_cores', None),
    ('ufo_vm_target_vcpus', 'Online vCPUs the host asked the guest for.',
     'target_vcpus', None),
    ('ufo_vm_online_vcpus', 'Online vCPUs the guest reports.',
     'online_vcpus', None),
    ('ufo_vm_utilization_vcpus',
     'Guest CPU utilization summed over its vCPUs, in vCPUs (1 = one '
     'vCPU busy all the time).', 'util', _ratio),
    ('ufo_vm_scheduling_frequency_hertz',
     'Scheduling frequency the controller uses: switches into a thread '
     'per second in the guest (all context switches from a guest module '
     'that predates that count; host-only: vCPU thread switch-ins).', 'sf',
     None),
    ('ufo_vm_model_r2',
     'R^2 of the fitted SF model at the current cores (1: a perfect '
     'fit).', 'r2', None),
    ('ufo_vm_paused', '1 while the guest\'s vCPUs are stopped.', 'paused',
     None),
    ('ufo_vm_latency_target_seconds',
     'Tail-latency target of the guest\'s flavor (ufo:latency_target_us) '
     'at its percentile; absent without one.', 'latency_target_us',
     _from_micro),
    ('ufo_vm_latency_target_quantile',
     'Quantile (0-1) the latency target bounds (ufo:latency_percentile '
     '/ 100).', 'latency_percentile', _ratio),
    ('ufo_vm_latency_seconds',
     'Tail latency the guest last published and the agent accepted, '
     'fresh or not (ufo_vm_latency_state); absent without one.',
     'latency_us', _from_micro),
    ('ufo_vm_latency_age_seconds',
     'Host time since the agent first saw that latency.', 'latency_age_s',
     None),
)

_VM_COUNTERS = (
    ('ufo_vm_vcpu_threads_cpu_seconds_total',
     'Host CPU time of the guest\'s vCPU threads.', 'vcpu_cpu_seconds'),
    ('ufo_vm_emulator_threads_cpu_seconds_total',
     'Host CPU time of the guest\'s other threads (emulator, I/O, '
     'vhost).', 'emulator_cpu_seconds'),
    ('ufo_vm_vcpu_threads_run_delay_seconds_total',
     'Time the guest\'s vCPU threads waited for a host CPU while '
     'runnable (run-queue delay).', 'vcpu_run_delay_seconds'),
    ('ufo_vm_emulator_threads_run_delay_seconds_total',
     'Time the guest\'s other threads (emulator, I/O, vhost) waited for a '
     'host CPU while runnable.', 'emulator_run_delay_seconds'),
)


def _number(value):
    return float(value) if isinstance(value, bool) else value


class SnapshotCollector(registry_mod.Collector):
    """Metric families of the snapshot ``source()`` returns at each scrape.

    ``source`` must return the snapshot dict without calling into the
    agent; an empty one (before the first tick) gives no families.
    """

    def __init__(self, source):
        self.source = source

    def collect(self):
        snap = self.source()
        if not snap:
            return
        yield from self._host(snap)
        yield from self._events(snap)
        yield from self._signal(snap.get('signal'))
        yield from self._vms(snap.get('vms', ()))

    @staticmethod
    def _host(snap):
        pools = snap.get('pools') or {}
        for name, text, group, key in _HOST_GAUGES:
            value = (pools if group else snap).get(key)
            if value is not None:
                yield core.GaugeMetricFamily(name, text, _number(value))
        if pools:
            family = core.GaugeMetricFamily(
                'ufo_pool_cores', 'Physical cores of each pool (vcpu: all '
                'guests\' vCPU pools together).', labels=['pool'])
            for pool, key in _POOLS:
                family.add_metric([pool], pools[key])
            yield family
        yield from _held(snap.get('held') or ())
        yield core.SummaryMetricFamily(
            'ufo_tick_duration_seconds', 'Duration of the ticks since '
            'start.', count_value=snap.get('ticks', 0),
            sum_value=snap.get('tick_seconds_sum', 0.0))

    @staticmethod
    def _events(snap):
        for name, text, key in _HOST_COUNTERS:
            yield core.CounterMetricFamily(name, text, snap.get(key, 0))
        family = core.CounterMetricFamily(
            'ufo_enforcement_errors_total', 'Driver calls of the enforcer '
            'that failed, by method (the guest keeps its pins or target '
            'until a later tick succeeds).', labels=['method'])
        errors = dict.fromkeys(enforcer.DRIVER_METHODS, 0)
        errors.update(snap.get('enforcement_errors') or {})
        for method in sorted(errors):
            family.add_metric([method], errors[method])
        yield family
        family = core.CounterMetricFamily(
            'ufo_controller_decisions_total', 'Changes the controller made '
            'to the guests\' cores, by action (revert: a trial move that '
            'hurt the guest was undone).', labels=['action'])
        decisions = dict.fromkeys((str(a) for a in plan_mod.Action), 0)
        decisions.update(snap.get('decisions') or {})
        for action in sorted(decisions):
            family.add_metric([action], decisions[action])
        yield family
        family = core.CounterMetricFamily(
            'ufo_controller_decision_rules_total', 'Changes the controller '
            'made to the guests\' cores, by action and the rule that '
            'decided (doc/source/controller.rst).', labels=['action', 'rule'])
        for row in snap.get('decision_rules') or ():
            family.add_metric([row['action'], row['rule']], row['count'])
        yield family

    @staticmethod
    def _signal(signal):
        if not signal:
            return
        family = core.GaugeMetricFamily(
            'ufo_host_state', '1 for the host signal\'s state (paper '
            'Appendix B.4), 0 for the others.', labels=['state'])
        for state in hostsignal.STATES:
            family.add_metric([state], float(signal['state'] == state))
        yield family
        for key, text in (
                ('reclaimable_cores', 'Cores a new guest could get.'),
                ('unmet_cores', 'Cores the pools lacked (host signal).'),
                ('sequence', 'Sequence number of the last host signal.')):
            yield core.GaugeMetricFamily('ufo_host_signal_%s' % key, text,
                                         signal[key])

    @staticmethod
    def _vms(vms):
        for name, text, key, scale in _VM_GAUGES:
            family = core.GaugeMetricFamily(name, text, labels=['uuid'])
            for vm in vms:
                value = vm.get(key)
                if value is not None:
                    value = scale(value) if scale else _number(value)
                    family.add_metric([vm['uuid']], value)
            yield family
        for name, text, key in _VM_COUNTERS:
            family = core.CounterMetricFamily(name, text, labels=['uuid'])
            for vm in vms:
                if vm.get(key) is not None:
                    family.add_metric([vm['uuid']], vm[key])
            yield family
        for name, text, key, states in (
                ('ufo_vm_mode', 'Where the guest\'s vCPUs run: 1 for its '
                 'mode, 0 for the others.', 'mode',
                 [str(m.value) for m in plan_mod.VmMode]),
                ('ufo_vm_signal', 'Where the guest\'s load signal comes '
                 'from: 1 for its source (guest module or host-only), 0 '
                 'for the other.', 'signal',
                 [sampler.MODE_GUEST, sampler.MODE_HOST_ONLY]),
                ('ufo_vm_channel_state', 'Whether the guest acknowledges '
                 'vCPU targets: 1 for its state, 0 for the others.',
                 'channel', [str(s) for s in acks.AckState]),
                ('ufo_vm_latency_state', 'The latency the guest publishes: '
                 'fresh (the controller uses it), stale, rejected (out of '
                 'bounds) or absent; 1 for its state, 0 for the others.',
                 'latency_state', list(latency.STATES))):
            family = core.GaugeMetricFamily(name, text,
                                            labels=['uuid', key])
            for vm in vms:
                for state in states:
                    family.add_metric([vm['uuid'], state],
                                      float(vm.get(key) == state))
            yield family


def make_registry(source):
    """A registry of the snapshot's metrics and this process's.

    Its own registry, not prometheus_client's global one: two servers in
    one process (tests) do not collide, and nothing else registers there.
    """
    registry = registry_mod.CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(source))
    process_collector.ProcessCollector(registry=registry)
    return registry


class MetricsServer:
    """Serves the latest snapshot from a daemon thread.

    The loop builds a snapshot only when one is wanted (:meth:`wanted`)
    and hands it over (:meth:`publish`): a request waits up to ``wait``
    seconds for the one the loop builds after its next tick, then is
    served the last one handed over (a stuck loop must not stall
    the endpoint).
    """

    def __init__(self, host, port, wait=0.0):
        self.snapshot = {}
        self.wait = wait
        self._published = 0
        self._wanted = False
        self._cond = threading.Condition()
        self.registry = make_registry(self.latest)
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                path = self.path.split('?', 1)[0]
                if path == '/metrics':
                    encoder, ctype = exposition.choose_encoder(
                        self.headers.get('Accept'))
                    body = encoder(server.registry)
                elif path == '/status':
                    body = json.dumps(server.latest(),
                                      sort_keys=True).encode()
                    ctype = 'application/json'
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header('Content-Type', ctype)
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, fmt, *args):
                LOG.debug('metrics: ' + fmt, *args)

        self.httpd = http.server.ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.address = self.httpd.server_address
        self._thread = threading.Thread(target=self.httpd.serve_forever,
                                        name='ufo-metrics', daemon=True)

    def latest(self):
        """A snapshot of after the next tick, or the last one at ``wait``."""
        with self._cond:
            self._wanted = True
            if self.wait > 0:
                published = self._published
                self._cond.wait_for(lambda: self._published != published,
                                    self.wait)
            return self.snapshot

    def wanted(self):
        """Whether a request waits for a snapshot (asked from the loop)."""
        return self._wanted

    def publish(self, snapshot):
        """The loop's snapshot after a tick, for the requests waiting."""
        with self._cond:
            self.snapshot = snapshot
            self._published += 1
            self._wanted = False
            self._cond.notify_all()

    def start(self):
        self._thread.start()
        LOG.info('Metrics and status on http://%s:%d/', *self.address[:2])

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def render(snapshot):
    """The Prometheus text exposition of a snapshot (and this process)."""
    return exposition.generate_latest(
        make_registry(lambda: snapshot)).decode()
