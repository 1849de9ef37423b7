"""The in-guest latency helper: histogram parsing, quantiles, publishing."""

import math
import os
import re
import subprocess

import pytest

from ufo_tools import guest_latency as gl

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

EXPOSITION = '''
# HELP rpc_seconds Request latency.
# TYPE rpc_seconds histogram
rpc_seconds_bucket{method="get",le="0.001"} 10
rpc_seconds_bucket{method="get",le="0.002"} 60
rpc_seconds_bucket{method="get",le="0.004"} 90 1700000000000
rpc_seconds_bucket{method="get",le="+Inf"} 100
rpc_seconds_bucket{le="0.001",method="put \\"x\\", y"} 0
rpc_seconds_bucket{le="0.002",method="put \\"x\\", y"} 0
rpc_seconds_bucket{le="0.004",method="put \\"x\\", y"} 50
rpc_seconds_bucket{le="+Inf",method="put \\"x\\", y"} 100
rpc_seconds_sum{method="get"} 0.2
rpc_seconds_count{method="get"} 100
rpc_seconds_bucket_other{le="1"} 7
other_seconds_bucket{le="0.001"} 99
rpc_seconds_bucket{le="NaN"} 3
'''


def test_buckets_are_summed_over_the_other_labels():
    assert gl.parse_buckets(EXPOSITION, 'rpc_seconds') == [
        (0.001, 10.0), (0.002, 60.0), (0.004, 140.0), (math.inf, 200.0)]
    assert gl.parse_buckets(EXPOSITION, 'missing') == []


def test_quantile_interpolates_like_histogram_quantile():
    buckets = [(0.001, 10.0), (0.002, 60.0), (0.004, 140.0),
               (math.inf, 200.0)]
    # Rank 100 of 200 lies in (0.002, 0.004]: 40 of its 80.
    assert gl.quantile(buckets, 0.5) == pytest.approx(0.003)
    # Rank 5 in the first bucket, from 0.
    assert gl.quantile(buckets, 0.025) == pytest.approx(0.0005)
    # In +Inf: the highest finite bound is all a histogram can say.
    assert gl.quantile(buckets, 0.99) == 0.004
    assert gl.quantile([(1.0, 0.0), (math.inf, 0.0)], 0.99) is None
    assert gl.quantile([(1.0, 5.0)], 0.5) is None     # no +Inf bucket
    with pytest.raises(ValueError):
        gl.quantile(buckets, 99)


def test_the_delta_is_the_interval_s_and_survives_a_restart():
    before = [(0.001, 10.0), (math.inf, 20.0)]
    after = [(0.001, 12.0), (math.inf, 30.0)]
    assert gl.delta(before, after) == [(0.001, 2.0), (math.inf, 10.0)]
    restarted = [(0.001, 1.0), (math.inf, 1.0)]
    assert gl.delta(after, restarted) == restarted
    assert gl.delta(None, after) == after


def test_publish_writes_microseconds_within_bounds(tmp_path):
    path = str(tmp_path / 'latency_us')
    assert gl.publish(849.6, path) == 850
    assert open(path).read() == '850\n'
    assert gl.publish(0.2, path) == 1
    assert gl.publish(3e7, path) == 10 ** 7
    with pytest.raises(ValueError):
        gl.publish(float('nan'), path)


def test_follow_publishes_each_interval_s_percentile(tmp_path):
    path = str(tmp_path / 'latency_us')
    pages = iter([
        'h_bucket{le="0.01"} 100\nh_bucket{le="0.02"} 100\n'
        'h_bucket{le="+Inf"} 100\n',
        # 100 new, all in (0.01, 0.02]: p50 = 0.015 s.
        'h_bucket{le="0.01"} 100\nh_bucket{le="0.02"} 200\n'
        'h_bucket{le="+Inf"} 200\n',
        # Nothing new: nothing published.
        'h_bucket{le="0.01"} 100\nh_bucket{le="0.02"} 200\n'
        'h_bucket{le="+Inf"} 200\n',
    ])
    written = []

    def fetch(url):
        if os.path.exists(path):
            written.append(open(path).read())
            os.unlink(path)
        return next(pages)
    now = [0.0]
    gl.follow('http://x/metrics', 'h', 50, path=path, fetch=fetch,
              clock=lambda: now[0],
              sleep=lambda s: now.__setitem__(0, now[0] + s), rounds=3)
    # First scrape: everything since the exporter started (p50 5 ms, in
    # the first bucket); then 15 ms; then nothing.
    assert written == ['5000\n', '15000\n']
    assert not os.path.exists(path)
    assert now[0] == 3.0


def test_the_test_guest_s_workload_publishes_its_percentile(tmp_path):
    exe = str(tmp_path / 'ufo-workload')
    subprocess.run(['cc', '-O2', '-Wall', '-Werror', '-pthread', '-o', exe,
                    os.path.join(TOP, 'guest_image', 'test-guest',
                                 'ufo_workload.c'), '-lm'], check=True)
    path = str(tmp_path / 'latency_us')
    out = subprocess.run(
        [exe, 'rate=200', 'svc_us=100', 'workers=2', 'report_ms=500',
         'duration=1', 'publish=95', 'latency_path=' + path],
        check=True, text=True, stdout=subprocess.PIPE, timeout=30).stdout
    lines = [x for x in out.splitlines() if x.startswith('UFO-WL t=')]
    assert len(lines) == 2
    for line in lines:
        p95, published = re.search(r'p95_us=(\d+) .*published_us=(\d+)',
                                   line).groups()
        assert published == p95 and int(p95) > 0
    assert open(path).read() == '%s\n' % published
