"""Application profiles: worker counts and the options that set them."""

import pytest

from ufo_sim import profiles


def test_memcached_and_nginx_start_one_worker_per_vcpu():
    for p in (profiles.MEMCACHED, profiles.NGINX):
        assert [p.workers(n) for n in (2, 8, 16)] == [2, 8, 16]


def test_fixed_worker_counts_ignore_the_flavor():
    # MySQL's workers are sysbench's connections; BE's its busy threads.
    assert profiles.MYSQL.workers(16) == profiles.MYSQL.workers(2) == 32
    assert profiles.BE(threads=3).workers(16) == 3


def test_the_max_load_flavor_keeps_its_workers():
    # max_rps was measured with 8 workers in the 8-vCPU flavor (32 for
    # MySQL): the per-vCPU count gives the same there.
    assert [p.workers(p.vcpus) for p in profiles.LC_PROFILES] == [8, 8, 32]


def test_a_fixed_thread_option_overrides_the_per_vcpu_count():
    p = profiles.with_options(profiles.MEMCACHED,
                              [profiles.parse_option('memcached.threads=4')])
    assert p.workers(16) == 4
    q = profiles.with_options(profiles.NGINX, [
        profiles.parse_option('nginx.threads_per_vcpu=2')])
    assert q.workers(16) == 32


@pytest.mark.parametrize('text,ok', [
    ('memcached.threads_per_vcpu=0', True),
    ('memcached.threads_per_vcpu=16', True),
    ('memcached.threads_per_vcpu=17', False),
    ('memcached.threads_per_vcpu=-1', False),
    ('memcached.threads_per_vcpu=1.5', False),
    ('memcached.threads=0', False),
])
def test_threads_per_vcpu_takes_an_integer_from_0(text, ok):
    if ok:
        assert profiles.parse_option(text)[0] == text.partition('=')[0]
    else:
        with pytest.raises(ValueError, match='integer from'):
            profiles.parse_option(text)
