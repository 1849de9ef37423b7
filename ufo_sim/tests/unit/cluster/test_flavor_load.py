"""The cloud's max load by flavor size (``ufo_sim.cluster.flavor_load``).

Measured on the real engine: one VM alone on its flavor's own CPUs.
"""

import pytest

from ufo_sim.cluster import flavor_load
from ufo_sim.cluster import host
from ufo_sim import profiles

MYSQL = profiles.by_name('mysql')


@pytest.mark.parametrize('name,vcpus', [('nginx', 3), ('mysql', 16)])
def test_the_stored_table_is_what_the_engine_measures(name, vcpus):
    profile = profiles.by_name(name)
    assert flavor_load.measure(profile, vcpus) == pytest.approx(
        flavor_load.factor(name, vcpus), abs=1e-6)


@pytest.mark.parametrize('profile', profiles.LC_PROFILES,
                         ids=lambda p: p.name)
def test_eight_vcpus_measure_the_profiles_own_max(profile):
    assert flavor_load.factor(profile.name, 8) == pytest.approx(1.0,
                                                                abs=0.03)


def test_a_big_flavor_near_its_peak_meets_qos_alone():
    # Seed 3 was not measured. At 0.9 of the linear share a 16-vCPU
    # MySQL VM misses QoS alone on its own 16 CPUs; at 0.9 of its
    # flavor's max load it meets it.
    linear = MYSQL.max_rps * 16 / MYSQL.vcpus
    assert flavor_load.p99_at(MYSQL, 16, 0.9 * linear, seed=3) > \
        MYSQL.qos_p99_us
    rps = host.offered_rps(MYSQL, 16, 0.9)
    assert rps < 0.9 * linear
    assert flavor_load.p99_at(MYSQL, 16, rps, seed=3) <= MYSQL.qos_p99_us


@pytest.mark.parametrize('vcpus', [1, 2, 4, 8])
def test_flavors_that_meet_qos_at_their_share_keep_it(vcpus):
    for profile in profiles.LC_PROFILES:
        if flavor_load.factor(profile.name, vcpus) >= 1.0:
            assert host.offered_rps(profile, vcpus, 0.5) == pytest.approx(
                0.5 * profile.max_rps * vcpus / profile.vcpus)


def test_every_size_measured_has_a_max_within_its_share():
    for profile in profiles.LC_PROFILES:
        for vcpus in range(1, flavor_load.MAX_VCPUS + 1):
            assert 0.0 < flavor_load.max_rps(profile, vcpus) <= \
                profile.max_rps * vcpus / profile.vcpus
    with pytest.raises(ValueError, match='no max load measured for mysql '
                                         'at 17 vCPUs'):
        flavor_load.max_rps(MYSQL, 17)


def test_the_largest_flavor_a_cloud_boots_is_measured():
    from ufo_sim.cluster import azure_trace
    from ufo_sim.cluster import workload
    sizes = [v for params in (workload.WorkloadParams(),
                              workload.held_out())
             for v, _ in params.flavors] + [azure_trace.MAX_VCPUS]
    assert max(sizes) <= flavor_load.MAX_VCPUS
