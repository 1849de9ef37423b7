"""SimDriver: the agent's driver interface over a real SimHost."""

import inspect

import pytest

from ufo_agent.channel import layout
from ufo_agent.driver import base
from ufo_agent.service import sampler as sampler_mod
from ufo_sim import driver as sim_driver
from ufo_sim import engine
from ufo_sim import profiles


def _host(cores=4, load=0.3):
    host = engine.SimHost(engine.HostSpec(cores=cores, smt=2), seed=3)
    vm = host.add_vm('vm1', vcpus=4, profile=profiles.MEMCACHED,
                     rps=load * profiles.MEMCACHED.max_rps)
    return host, vm


def test_implements_every_abstract_method():
    abstract = {name for name, member in inspect.getmembers(
        base.HypervisorDriver) if getattr(member, '__isabstractmethod__',
                                          False)}
    assert abstract
    for name in abstract:
        assert name in vars(sim_driver.SimDriver), name
    host, vm = _host()
    assert isinstance(sim_driver.SimDriver(host), base.HypervisorDriver)


def test_guests_events_and_host_cpus():
    host, vm = _host()
    d = sim_driver.SimDriver(host)
    guest = d.add(vm, 4)
    assert d.guests() == [guest]
    assert guest.restore_vcpu_cpus == frozenset(range(8))
    assert d.events() == [(vm, base.GuestEvent.STARTED)]
    assert d.events() == []
    cpus = d.host_cpus()
    assert cpus.siblings == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert cpus.online == frozenset(range(8))


def test_pins_and_targets_round_trip_to_the_host():
    # A light guest: the vCPU in transit gets its CPU at once (at 0.3 its
    # four workers keep both CPUs busy and a vCPU's turn can come late).
    host, vm = _host(load=0.15)
    d = sim_driver.SimDriver(host)
    d.add(vm, 4)
    d.pin_vcpus(vm, frozenset({2, 3}))
    d.pin_emulator(vm, {0, 1})
    assert d.read_pins(vm) == ({frozenset({2, 3})}, frozenset({0, 1}))
    seq = d.set_vcpu_target(vm, 2)
    # The guest takes one vCPU offline after the other, each for the
    # hotplug cost, and answers once it is done, on its page too.
    cost = host.spec.hotplug_cost
    assert host.online(vm) == 4
    assert not d.acknowledged(vm, seq)
    assert d.observe(vm).guest.sample.ack_target_seq == 0
    host.advance(1.5 * cost)
    assert not d.acknowledged(vm, seq)
    host.advance(cost)
    assert host.online(vm) == 2
    assert d.acknowledged(vm, seq)
    assert not d.acknowledged(vm, seq + 1)
    assert d.observe(vm).guest.sample.ack_target_seq == seq
    # The vCPU threads ran only on their pins: CPUs 4-7 stayed idle.
    idle = [c['idle_ns'] for c in host.cpu_time()]
    assert all(idle[c] == round(host.now * 1e9) for c in (4, 5, 6, 7))
    assert idle[2] < host.now * 1e9 and idle[3] < host.now * 1e9
    d.release(vm)
    host.advance(2.5 * cost)
    assert host.online(vm) == 4
    assert d.read_pins(vm) == ({frozenset(range(8))}, frozenset(range(8)))


def test_the_agents_sleep_runs_the_host_on():
    host, vm = _host()
    d = sim_driver.SimDriver(host)
    d.add(vm, 4)
    d.sleep(0.005)
    # Real seconds: the engine's are TIME_SCALE times longer.
    assert host.now == pytest.approx(0.005 * engine.TIME_SCALE)
    assert d.now() == pytest.approx(0.005)
    # A harness then runs the host to the interval's end, not past it.
    host.advance_to(engine.TIME_SCALE)
    assert host.now == engine.TIME_SCALE
    host.advance_to(0.5 * engine.TIME_SCALE)
    assert host.now == engine.TIME_SCALE


def test_rejects_what_a_real_host_would():
    host, vm = _host()
    d = sim_driver.SimDriver(host)
    d.add(vm, 4)
    with pytest.raises(base.DriverError):
        d.pin_vcpus(vm, {8})
    with pytest.raises(base.DriverError):
        d.pin_vcpus(vm, set())
    with pytest.raises(base.DriverError):
        d.set_vcpu_target(vm, 5)
    with pytest.raises(base.DriverError):
        d.observe('nope')
    d.forget(vm)
    with pytest.raises(base.DriverError):
        d.read_pins(vm)


def test_observations_are_in_real_world_units():
    host, vm = _host(load=0.5)
    d = sim_driver.SimDriver(host)
    d.add(vm, 4)
    scale = engine.TIME_SCALE
    first = d.observe(vm)
    host.advance(scale)              # one real-world second
    second = d.observe(vm)
    assert second.time - first.time == pytest.approx(1.0)
    counters = host.counters(vm)
    assert second.vcpu_cpu_ns == int(counters.vcpu_cpu_ns / scale)
    assert second.emulator_wait_ns == int(counters.emulator_wait_ns / scale)
    assert second.emulator_threads == host.profile(vm).emulator_threads > 0
    # Half of memcached's max load keeps a few vCPUs busy: between one
    # and four CPUs' worth of vCPU time per real second.
    busy = (second.vcpu_cpu_ns - first.vcpu_cpu_ns) / 1e9
    assert 0.5 < busy < 4.0
    report = second.guest
    assert report.ok and report.sample.sample_count == 1
    assert report.sample.online_vcpus == 4
    assert 0 < report.sample.util <= 400
    assert report.sample.ctxsw_per_sec > 0
    # SF is the switches into a thread, as the guest module publishes it:
    # fewer than all switches, which include those into idle.
    assert 0 < report.sample.sched_in_per_sec < report.sample.ctxsw_per_sec
    assert report.sample.scheduling_frequency == \
        report.sample.sched_in_per_sec
    # The same instant read again is the same sample, as on the page.
    assert d.observe(vm).guest is report


def test_sampler_accepts_the_guest_report():
    host, vm = _host(load=0.5)
    d = sim_driver.SimDriver(host)
    d.add(vm, 4)
    sampler = sampler_mod.Sampler()
    assert sampler.rates(vm, d.observe(vm)) is None
    # The first sample's window began before the host's first read: not
    # checkable, so not used.
    host.advance(engine.TIME_SCALE)
    assert sampler.rates(vm, d.observe(vm)).mode == \
        sampler_mod.MODE_HOST_ONLY
    for _ in range(3):
        host.advance(engine.TIME_SCALE)
        rates = sampler.rates(vm, d.observe(vm))
        # Guest mode: the guest claims no more than its threads ran
        # (less, by the time KVM halt-polls on behalf of idle vCPUs).
        assert rates.mode == sampler_mod.MODE_GUEST, rates.reason
        assert 0.5 * rates.vcpu_pct < rates.sample.util <= rates.vcpu_pct
        assert rates.emulator_pct > 0


def test_published_latency_reaches_the_page_and_the_samplers_watch():
    host, vm = _host(load=0.5)
    d = sim_driver.SimDriver(host)
    guest = d.add(vm, 4, latency_target_us=500, latency_percentile=95.0)
    assert (guest.latency_target_us, guest.latency_percentile) == (500, 95)
    sampler = sampler_mod.Sampler()
    sampler.rates(vm, d.observe(vm))
    host.advance(engine.TIME_SCALE)
    page = d.observe(vm).guest.sample
    # Nothing published yet: no flag, no value, as from a real page.
    assert not page.flags & layout.GUEST_FLAG_LATENCY
    assert page.latency_us is None
    lat = []
    for published in (310.4, 420.6, 380.0):
        d.publish_latency(vm, published)
        host.advance(engine.TIME_SCALE)
        obs = d.observe(vm)
        assert obs.guest.sample.flags & layout.GUEST_FLAG_LATENCY
        lat.append(sampler.rates(vm, obs).sample.latency_us)
    # Whole microseconds, each a step further; the first value seen is
    # where the agent's watch starts counting, not a measurement.
    assert obs.guest.sample.latency_seq == 3
    assert lat == [None, 421, 380]
    # Nothing new: the last value stands for three seconds, then not.
    for expected in (380, 380, 380, None):
        host.advance(engine.TIME_SCALE)
        assert sampler.rates(vm, d.observe(vm)).sample.latency_us == \
            expected


def test_no_channel_means_host_only():
    host, vm = _host()
    d = sim_driver.SimDriver(host)
    d.add(vm, 4, channel=False)
    assert d.set_vcpu_target(vm, 2) is None
    assert d.observe(vm).guest is None


def test_set_vcpus_idle_soaks_a_be_guest_until_release():
    host = engine.SimHost(engine.HostSpec(cores=2, smt=1), seed=3)
    busy = host.add_vm('busy', 1, profiles.BE(1))
    be = host.add_vm('be', 1, profiles.BE(1))
    d = sim_driver.SimDriver(host)
    d.add(busy, 1, vm_class='be')
    d.add(be, 1, vm_class='be')
    for vm in (busy, be):
        d.pin_vcpus(vm, {0})
        d.pin_emulator(vm, {1})
    d.set_vcpus_idle(be, True)
    host.advance(1.0)
    before = host.counters(be).vcpu_cpu_ns
    host.advance(3.0)
    assert host.counters(be).vcpu_cpu_ns - before < 0.01 * 3e9
    # Released, it is a normal guest again (kept on CPU 0 to see it).
    d.release(be)
    host.pin_vcpus(be, [0])
    before = host.counters(be).vcpu_cpu_ns
    host.advance(3.0)
    assert host.counters(be).vcpu_cpu_ns - before > 0.3 * 3e9
    with pytest.raises(base.DriverError):
        d.set_vcpus_idle('nope', True)


def test_remove_stops_the_vm_and_tells_the_agent():
    host, vm = _host()
    d = sim_driver.SimDriver(host)
    d.add(vm, 4)
    d.events()
    d.remove(vm)
    assert d.guests() == []
    assert d.events() == [(vm, base.GuestEvent.STOPPED)]
    with pytest.raises(base.DriverError):
        d.observe(vm)
    with pytest.raises(base.DriverError):
        d.remove(vm)
    with pytest.raises(ValueError):
        host.set_rps(vm, 100.0)
