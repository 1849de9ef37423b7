"""The latency a guest publishes: taken only when new, flagged and sane."""

import struct

import hypothesis
from hypothesis import strategies as st
import pytest

from ufo_agent.channel import host_channel
from ufo_agent.channel import latency
from ufo_agent.channel import layout
from ufo_agent.channel import report
from ufo_agent.tests.unit.channel import test_host_channel as pages

LAT = layout.GUEST_FLAG_LATENCY


def sample(latency_us, seq):
    """A validated GuestSample carrying a latency report (None: no flag)."""
    return report.GuestSample(
        flags=layout.GUEST_FLAG_HOST_VALID, ack_target_seq=0,
        applied_target=0, online_vcpus=2, present_vcpus=2,
        online_cpus=(0, 1), sample_count=1, timestamp_ns=1, interval_ns=1,
        util=10.0, steal=0.0, ctxsw_per_sec=10, own_ctxsw_per_sec=1,
        host_errors=0, watchdog_fires=0, latency_us=latency_us,
        latency_seq=seq)


def test_a_new_report_is_fresh_until_stale_after():
    watch = latency.LatencyWatch(stale_after=3.0)
    # The first one seen only starts the count: nobody knows its age.
    assert watch.update(sample(900, 7), 100.0).usable_us is None
    r = watch.update(sample(800, 8), 101.0)
    assert r.fresh and r.usable_us == 800.0 and r.age_s == 0.0
    # Read again without a new report: the same value while fresh.
    assert watch.update(sample(800, 8), 103.5).usable_us == 800.0
    r = watch.update(sample(800, 8), 104.5)
    assert r.state == latency.STATE_STALE and r.usable_us is None
    assert r.value_us == 800.0 and r.age_s == pytest.approx(3.5)
    # A new report makes it fresh again.
    assert watch.update(sample(700, 9), 105.0).usable_us == 700.0


def test_without_the_flag_there_is_no_latency():
    # An older module, or a guest whose software never published.
    watch = latency.LatencyWatch()
    for t, seq in enumerate((0, 1, 2)):
        assert watch.update(sample(None, seq), float(t)) is latency.ABSENT


def test_a_value_out_of_bounds_is_rejected_and_clears_the_last():
    watch = latency.LatencyWatch()
    watch.update(sample(500, 1), 0.0)
    assert watch.update(sample(500, 2), 1.0).usable_us == 500.0
    for seq, bad in enumerate((0, latency.MAX_US + 1, 0xFFFFFFFF), 3):
        r = watch.update(sample(bad, seq), 1.5)
        assert r.state == latency.STATE_REJECTED and r.usable_us is None
        assert 'not in 1..10000000' in r.reason
    # Still rejected on later reads of the same report.
    assert watch.update(sample(0xFFFFFFFF, 5), 1.6).usable_us is None
    assert watch.update(sample(latency.MAX_US, 6), 2.0).usable_us == \
        latency.MAX_US


def test_a_repeated_sequence_is_no_new_report():
    # A guest that rewrites the value without counting gets no freshness.
    watch = latency.LatencyWatch(stale_after=3.0)
    watch.update(sample(500, 1), 0.0)
    watch.update(sample(500, 2), 1.0)
    r = watch.update(sample(50, 2), 5.0)
    assert r.state == latency.STATE_STALE and r.value_us == 500.0


def test_the_sequence_wraps_and_a_restarted_count_starts_over():
    watch = latency.LatencyWatch()
    watch.update(sample(500, 0xFFFFFFFF), 0.0)
    assert watch.update(sample(400, 0), 1.0).usable_us == 400.0
    # Backwards (a module loaded again): counted afresh, not taken.
    assert watch.update(sample(300, 0x10), 2.0).usable_us == 300.0
    r = watch.update(sample(200, 3), 3.0)
    assert r.usable_us is None and 'went back' in r.reason
    assert watch.update(sample(100, 4), 4.0).usable_us == 100.0


def test_no_valid_page_drops_the_value_but_not_the_count():
    watch = latency.LatencyWatch()
    watch.update(sample(500, 1), 0.0)
    watch.update(sample(500, 2), 1.0)
    assert watch.update(None, 1.5) is latency.ABSENT
    # The same report on the page again is not new.
    assert watch.update(sample(500, 2), 2.0).usable_us is None
    assert watch.update(sample(500, 3), 2.5).usable_us == 500.0
    # A torn read keeps what was accepted, until it is stale.
    assert watch.held(3.0).usable_us == 500.0
    assert watch.held(6.0).usable_us is None


# -- through the page -------------------------------------------------


@pytest.fixture
def chan(tmp_path):
    ch = host_channel.HostChannel(str(tmp_path / 'page'), pages.VCPUS)
    ch.initialize()
    yield ch
    ch.close()


def read_latency(chan, **kw):
    pages.write_guest(chan, **kw)
    r = chan.read_guest()
    assert r.ok, r.reason
    return r.sample.latency_us, r.sample.latency_seq


def test_the_page_carries_latency_only_with_its_flag(chan):
    flags = layout.GUEST_FLAG_HOST_VALID
    assert read_latency(chan, flags=flags, latency_us=900,
                        latency_seq=3) == (None, 3)
    assert read_latency(chan, flags=flags | LAT, latency_us=900,
                        latency_seq=4) == (900, 4)


def test_a_module_that_predates_the_fields_reads_as_no_latency(chan):
    # Its page: two cache lines; the third as the host left it (zero).
    data = layout.pack(layout.GUEST_FIELDS, layout.GUEST_STRUCT,
                       pages.guest_values())
    chan.write_raw(layout.GUEST_OFFSET, data[:128])
    r = chan.read_guest()
    assert r.ok and r.sample.latency_us is None


def test_a_garbage_latency_costs_the_latency_not_the_page(chan):
    watch = latency.LatencyWatch()
    flags = layout.GUEST_FLAG_HOST_VALID | LAT
    for t, (value, seq) in enumerate(((5, 1), (0, 2), (0xFFFFFFFF, 3))):
        pages.write_guest(chan, flags=flags, latency_us=value,
                          latency_seq=seq, sample_count=t + 1,
                          timestamp_ns=(t + 1) * 10 ** 9)
        r = chan.read_guest()
        assert r.ok, r.reason
        assert watch.update(r.sample, float(t)).usable_us is None


def test_an_unknown_flag_next_to_latency_still_breaks_the_page(chan):
    pages.write_guest(chan, flags=LAT << 1, latency_us=1, latency_seq=1)
    r = chan.read_guest()
    assert r.status == report.STATUS_INVALID and 'flags' in r.reason


@hypothesis.settings(max_examples=300, deadline=None)
# A latency first shown by the read that publishes it is usable at once.
@hypothesis.example(
    areas=[bytes(layout.GUEST_SIZE),
           bytes(130) + b'\x01' + bytes(4) + b'\x01' +
           bytes(layout.GUEST_SIZE - 136)],
    plausible=True)
@hypothesis.given(st.lists(st.binary(min_size=layout.GUEST_SIZE,
                                     max_size=layout.GUEST_SIZE),
                           min_size=1, max_size=6),
                  st.booleans())
def test_a_lying_page_never_yields_a_latency_out_of_bounds(
        tmp_path_factory, areas, plausible):
    ch = host_channel.HostChannel(
        str(tmp_path_factory.mktemp('l') / 'page'), pages.VCPUS)
    ch.initialize()
    watch = latency.LatencyWatch()
    published = set()
    for t, data in enumerate(areas):
        data = bytearray(data)
        struct.pack_into('<I', data, 8,
                         struct.unpack_from('<I', data, 8)[0] & ~1)
        if plausible:
            # Garbage where it counts: the latency; the rest passes.
            good = layout.pack(layout.GUEST_FIELDS, layout.GUEST_STRUCT,
                               pages.guest_values(
                                   flags=layout.GUEST_FLAG_HOST_VALID | LAT,
                                   sample_count=t + 1,
                                   timestamp_ns=(t + 1) * 10 ** 9))
            data[:128] = good[:128]
        ch.write_raw(layout.GUEST_OFFSET, bytes(data))
        r = ch.read_guest()
        if t > 0 and r.ok and r.sample.latency_us is not None:
            published.add(r.sample.latency_us)
        reading = watch.update(r.sample if r.ok else None, float(t))
        if reading.usable_us is not None:
            assert latency.MIN_US <= reading.usable_us <= latency.MAX_US
            # Only ever a value a read after the first showed.
            assert reading.usable_us in published
    ch.close()
