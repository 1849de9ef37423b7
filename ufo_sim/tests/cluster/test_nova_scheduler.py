"""Host selection by Nova's filter scheduler code, with and without UFO."""

import collections
import uuid

import pytest

from ufo_agent import hostsignal
from ufo_sim.cluster import nova_scheduler as ns

FLAVOR = ns.Flavor('m1.medium', 4, 8192)


def _vm(i):
    return str(uuid.UUID(int=i + 1))


def _signal(state, idle=0, reclaimable=0, unmet=0, seq=1):
    return hostsignal.HostSignal(
        state=state, idle_cores=idle, reclaimable_cores=reclaimable,
        managed_cores=16, unmet_cores=unmet, sequence=seq, timestamp=0.0,
        source='test')


def _boot(sched, count, flavor=FLAVOR, start=0):
    placed = []
    for i in range(start, start + count):
        host = sched.select(_vm(i), flavor)
        if host is not None:
            sched.claim(host, _vm(i), flavor)
        placed.append(host)
    return placed


def _hosts(count, cpus=16, ratio=4.0, memory_mb=262144):
    return [ns.HostBooks('h%d' % i, cpus, memory_mb, ratio)
            for i in range(count)]


def test_default_spreads_and_stops_at_the_allocation_ratio():
    hosts = _hosts(3, cpus=8, ratio=2.0)
    sched = ns.NovaScheduler(hosts)
    placed = _boot(sched, 14)
    # Nova's RAM and CPU weighers spread: each host takes one in turn.
    assert collections.Counter(placed[:12]) == {'h0': 4, 'h1': 4, 'h2': 4}
    # 8 CPUs x 2.0 = 16 vCPUs a host: the 13th 4-vCPU VM has no room.
    assert placed[12:] == [None, None]
    assert [h.vcpus_used for h in hosts] == [16, 16, 16]


def test_a_deleted_instance_frees_its_room():
    hosts = _hosts(1, cpus=4, ratio=1.0)
    sched = ns.NovaScheduler(hosts)
    assert _boot(sched, 2) == ['h0', None]
    sched.release('h0', _vm(0))
    assert _boot(sched, 1, start=5) == ['h0']


def test_same_seed_same_choices():
    def run(seed):
        sched = ns.NovaScheduler(_hosts(4), seed=seed, options={
            ('filter_scheduler', 'host_subset_size'): 3})
        return _boot(sched, 20)
    assert run(1) == run(1)
    assert run(1) != run(2)


def test_ufo_keeps_boots_off_overloaded_and_full_hosts():
    hosts = _hosts(3)
    sched = ns.NovaScheduler(hosts, ufo=True)
    sched.receive_signal('h0', _signal(hostsignal.OVERLOADED, unmet=2))
    # Saturated with one idle core: a 4-vCPU VM expects 2 (x 0.5).
    sched.receive_signal('h1', _signal(hostsignal.SATURATED, idle=1))
    assert set(_boot(sched, 6)) == {'h2'}


def test_without_ufo_the_signals_change_nothing():
    hosts = _hosts(3)
    sched = ns.NovaScheduler(hosts)
    sched.receive_signal('h0', _signal(hostsignal.OVERLOADED, unmet=2))
    assert set(_boot(sched, 6)) == {'h0', 'h1', 'h2'}


def test_ufo_weigher_prefers_reclaimable_cores():
    hosts = _hosts(3)
    sched = ns.NovaScheduler(hosts, ufo=True)
    for name, cores in (('h0', 1), ('h1', 9), ('h2', 3)):
        sched.receive_signal(name, _signal(hostsignal.UNDERLOADED, idle=cores,
                                           reclaimable=cores))
    assert _boot(sched, 1) == ['h1']


def test_a_stale_signal_counts_as_unknown():
    now = [0.0]
    hosts = _hosts(2)
    sched = ns.NovaScheduler(hosts, ufo=True, clock=lambda: now[0], options={
        ('ufo', 'unknown_host_policy'): 'fail-closed'})
    sched.receive_signal('h0', _signal(hostsignal.UNDERLOADED, idle=8))
    sched.receive_signal('h1', _signal(hostsignal.UNDERLOADED, idle=8))
    assert set(_boot(sched, 4)) == {'h0', 'h1'}
    now[0] = sched.nova.conf.ufo.signal_max_age + 1.0
    sched.receive_signal('h1', _signal(hostsignal.UNDERLOADED, idle=8,
                                       seq=2))
    assert set(_boot(sched, 4, start=10)) == {'h1'}


@pytest.mark.parametrize('ufo', [False, True])
def test_nova_config_follows_the_scheduler(ufo):
    sched = ns.NovaScheduler(_hosts(1), ufo=ufo)
    conf = sched.nova.conf.filter_scheduler
    assert ('UFOFilter' in conf.enabled_filters) == ufo
    assert (ns.UFO_WEIGHER in conf.weight_classes) == ufo
    assert 'ComputeFilter' in conf.enabled_filters
