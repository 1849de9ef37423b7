"""A UFO host's own signal reaches Nova's scheduler."""

from ufo_sim.cluster import host as host_mod
from ufo_sim.cluster import nova_scheduler as ns
from ufo_sim.tests.unit.cluster import requests


def test_the_agents_signal_is_accepted_and_read_by_the_filter():
    hosts = {name: host_mod.ClusterHost(name, 8, 2, 'ufo', seed=i)
             for i, name in enumerate(('h0', 'h1'))}
    books = [ns.HostBooks(name, 16, 262144, 4.0) for name in hosts]
    now = [0.0]
    sched = ns.NovaScheduler(books, ufo=True, clock=lambda: now[0])
    hosts['h0'].boot(requests.steady('a', mean=0.2))
    for h in hosts.values():
        h.step(5, {'a': 0.2})
    now[0] = 5.0
    for name, h in hosts.items():
        signal = h.signal()
        assert signal is not None
        sched.receive_signal(name, signal)
    for name, h in hosts.items():
        found = sched.cache.lookup(name)
        assert found.signal == h.signal()
        assert found.state == h.signal().state
    # UFOFilter and UFOIdlePoolWeigher read them on the next boot.
    assert sched.select('b', ns.Flavor('m1.medium', 4, 8192)) in hosts
