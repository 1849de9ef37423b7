"""The modelled allocation candidates against a real Placement."""

import random
import uuid

import pytest
import requests

from ufo_sim.cluster import nova_scheduler
from ufo_sim.cluster import placement

TRAIT = 'CUSTOM_UFO_OVERLOADED'
HEADERS = {'x-auth-token': 'admin',
           'OpenStack-API-Version': 'placement 1.39'}


@pytest.fixture
def real_placement():
    from placement.tests.functional.fixtures import placement as fixture
    f = fixture.PlacementFixture()
    f.setUp()
    yield f.endpoint, requests.Session()
    f.cleanUp()


def _call(session, method, url, **kw):
    resp = session.request(method, url, headers=HEADERS, **kw)
    assert resp.status_code < 300, resp.text
    return resp.json() if resp.text else None


def _cloud(rng, count):
    hosts = []
    for i in range(count):
        cpus = rng.choice((16, 32, 48))
        host = nova_scheduler.HostBooks(
            'h%d' % i, cpus, rng.choice((65536, 131072)),
            rng.choice((1.0, 2.0, 4.0)), rng.choice((1.0, 1.5)),
            disk_gb=rng.choice((200, 1000)))
        if rng.random() < 0.3:
            host.traits.add(TRAIT)
        for j in range(rng.randrange(0, 12)):
            flavor = nova_scheduler.Flavor(
                'f', rng.choice((1, 2, 4, 8)), rng.choice((2048, 8192)),
                rng.choice((10, 40)))
            if placement.candidates([host], flavor.vcpus, flavor.memory_mb,
                                    flavor.disk_gb):
                host.instances[str(uuid.UUID(int=rng.getrandbits(128)))] = \
                    flavor
        hosts.append(host)
    return hosts


def _load(endpoint, session, hosts):
    """The hosts as resource providers, as nova-compute reports them."""
    by_uuid = {}
    _call(session, 'PUT', endpoint + '/traits/' + TRAIT)
    for host in hosts:
        rp = str(uuid.uuid5(uuid.NAMESPACE_DNS, host.name))
        by_uuid[rp] = host.name
        _call(session, 'POST', endpoint + '/resource_providers',
              json={'name': host.name, 'uuid': rp})
        # The libvirt driver's inventory: max_unit is the node's size.
        inv = {'VCPU': {'total': host.cpus, 'max_unit': host.cpus,
                        'allocation_ratio': host.cpu_allocation_ratio},
               'MEMORY_MB': {'total': host.memory_mb,
                             'max_unit': host.memory_mb,
                             'allocation_ratio': host.ram_allocation_ratio},
               'DISK_GB': {'total': host.disk_gb, 'max_unit': host.disk_gb,
                           'allocation_ratio': 1.0}}
        _call(session, 'PUT', '%s/resource_providers/%s/inventories'
              % (endpoint, rp),
              json={'resource_provider_generation': 0, 'inventories': inv})
        if host.traits:
            _call(session, 'PUT', '%s/resource_providers/%s/traits'
                  % (endpoint, rp),
                  json={'resource_provider_generation': 1,
                        'traits': sorted(host.traits)})
        for consumer, flavor in host.instances.items():
            _call(session, 'PUT', '%s/allocations/%s' % (endpoint, consumer),
                  json={'allocations': {rp: {'resources': {
                      'VCPU': flavor.vcpus, 'MEMORY_MB': flavor.memory_mb,
                      'DISK_GB': flavor.disk_gb}}},
                      'project_id': str(uuid.UUID(int=1)),
                      'user_id': str(uuid.UUID(int=2)),
                      'consumer_generation': None,
                      'consumer_type': 'INSTANCE'})
    return by_uuid


@pytest.mark.parametrize('seed', [1, 2, 3])
def test_same_candidates_as_placement(real_placement, seed):
    endpoint, session = real_placement
    rng = random.Random(seed)
    hosts = _cloud(rng, 8)
    by_uuid = _load(endpoint, session, hosts)
    differences = []
    some = none = 0
    for _ in range(40):
        vcpus = rng.choice((1, 2, 4, 8, 16, 32, 64))
        memory_mb = rng.choice((1024, 8192, 32768, 131072))
        disk_gb = rng.choice((1, 20, 160))
        forbid = rng.random() < 0.5
        query = 'resources=VCPU:%d,MEMORY_MB:%d,DISK_GB:%d' % (
            vcpus, memory_mb, disk_gb)
        if forbid:
            query += '&required=!' + TRAIT
        real = sorted(by_uuid[rp] for rp in _call(
            session, 'GET', endpoint + '/allocation_candidates?' + query)
            ['provider_summaries'])
        model = sorted(placement.candidates(
            hosts, vcpus, memory_mb, disk_gb,
            frozenset([TRAIT]) if forbid else frozenset()))
        if real != model:
            differences.append((query, real, model))
        some += bool(real)
        none += not real
    assert not differences
    # The requests tried both outcomes.
    assert some and none
