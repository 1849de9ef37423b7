"""The sampler: guest mode, host-only mode and why.

A simulated guest publishes a sample every second of its own clock, out
of phase with the host's ticks, from the same busy profile whose
integral the host sees as its vCPU threads' CPU time.
"""

import pytest

from ufo_agent.channel import layout
from ufo_agent.channel import report
from ufo_agent.driver import base
from ufo_agent.service import sampler as sampler_mod

STEP = 0.001


class Guest:
    """Busy profile ``busy(t)`` in vCPUs; wake-ups and switches per s."""

    def __init__(self, busy, vcpus=2, phase=0.37, wakeups=50.0,
                 switches_per_cpu_s=2000.0, own=100.0):
        self.busy = busy
        self.vcpus = vcpus
        self.phase = phase
        self.wakeups = wakeups
        self.switches_per_cpu_s = switches_per_cpu_s
        self.own = own
        self.lie_util = 1.0
        self.lie_switches = 1.0
        # Switches into threads per switch, when the module publishes
        # them (None: a module that predates the field).
        self.sched_in_share = None
        # Guest software's latency: t -> (us, seq) published by host
        # time t; None: never published.
        self.latency = None
        self.busy_reads = 0
        # Host run delay of its vCPU threads per CPU second they ran.
        self.wait_per_cpu = 0.0
        self._cum = [0.0]

    def cpu_s(self, t):
        """CPU seconds of the vCPU threads from 0 to ``t``."""
        steps = int(round(t / STEP))
        cum = self._cum
        while len(cum) <= steps:
            cum.append(cum[-1] + self.busy((len(cum) - 1) * STEP) * STEP)
        return cum[steps]

    def sample(self, t):
        """The newest sample published by host time ``t``."""
        k = int((t - self.phase) // 1.0)
        end = self.phase + k
        busy = self.cpu_s(end) - self.cpu_s(end - 1.0)
        util = 100.0 * busy * self.lie_util
        switches = (busy * self.switches_per_cpu_s + self.wakeups) * \
            self.lie_switches
        flags = layout.GUEST_FLAG_HOST_VALID
        sched_in = None
        if self.sched_in_share is not None:
            flags |= layout.GUEST_FLAG_SCHED_IN
            sched_in = int(switches * self.sched_in_share)
        latency_us, latency_seq = None, 0
        if self.latency is not None:
            flags |= layout.GUEST_FLAG_LATENCY
            latency_us, latency_seq = self.latency(t)
        return report.GuestSample(
            flags=flags, ack_target_seq=0,
            applied_target=0, online_vcpus=self.vcpus,
            present_vcpus=self.vcpus,
            online_cpus=tuple(range(self.vcpus)), sample_count=k,
            timestamp_ns=int(end * 1e9), interval_ns=10 ** 9,
            util=min(util, 100.0 * self.vcpus), steal=0.0,
            ctxsw_per_sec=int(switches), own_ctxsw_per_sec=int(self.own),
            host_errors=0, watchdog_fires=0, sched_in_per_sec=sched_in,
            latency_us=latency_us, latency_seq=latency_seq)

    def observe(self, t):
        if self.busy_reads:
            self.busy_reads -= 1
            guest = report.GuestReport(report.STATUS_BUSY, 'seq odd')
        else:
            guest = report.GuestReport(report.STATUS_OK, '', self.sample(t))
        slices = int(t * (self.wakeups + self.own))
        cpu_ns = int(self.cpu_s(t) * 1e9)
        return base.Observation(t, cpu_ns, int(cpu_ns * self.wait_per_cpu),
                                slices, 0, guest)


def run(guest, ticks, sampler=None, start=100.0, tick=1.0):
    sampler = sampler or sampler_mod.Sampler()
    out = []
    for i in range(ticks):
        rates = sampler.rates('g', guest.observe(start + i * tick))
        if rates is not None:
            out.append(rates)
    return sampler, out


def steady(rate):
    return lambda t: rate


def test_an_honest_guest_is_in_guest_mode():
    _, out = run(Guest(steady(0.6)), 15)
    assert {r.mode for r in out[1:]} == {sampler_mod.MODE_GUEST}
    assert out[-1].sample.util == pytest.approx(60.0, abs=0.5)


def test_a_sample_whose_window_the_host_did_not_measure_is_not_used():
    # The first sample after the host starts observing a guest covers
    # time before the host's first counters: it cannot be checked.
    _, out = run(Guest(steady(0.6)), 3)
    assert out[0].mode == sampler_mod.MODE_HOST_ONLY
    assert 'has not measured' in out[0].reason
    assert not out[0].fault         # every guest, at every start
    assert out[1].mode == sampler_mod.MODE_GUEST


def test_the_controller_reads_the_switch_in_rate_as_sf():
    guest = Guest(steady(0.6))
    guest.sched_in_share = 0.6
    _, out = run(guest, 5)
    all_switches = 0.6 * 2000.0 + 50.0
    assert out[-1].mode == sampler_mod.MODE_GUEST
    assert out[-1].sample.sf == pytest.approx(0.6 * all_switches, abs=1)
    assert out[-1].sample.sf_counts_idle is False


def test_an_old_module_s_sf_is_every_switch():
    _, out = run(Guest(steady(0.6)), 5)
    assert out[-1].sample.sf == pytest.approx(0.6 * 2000.0 + 50.0, abs=1)
    # Another scale: the controller does not mix it with switch-ins.
    assert out[-1].sample.sf_counts_idle is True


def test_an_idle_guest_claiming_ten_percent_is_host_only():
    # The controller parks a guest below 1 %: claiming 10 % while its
    # vCPU threads run 0.2 % of a CPU keeps cores it does not use.
    guest = Guest(steady(0.002))
    sampler, out = run(guest, 4)
    assert out[-1].mode == sampler_mod.MODE_GUEST
    guest.lie_util = 50.0
    _, out = run(guest, 2, sampler, start=104.0)
    assert out[-1].mode == sampler_mod.MODE_HOST_ONLY
    assert 'vCPU-s busy' in out[-1].reason and out[-1].fault
    assert out[-1].sample.util == pytest.approx(0.2, abs=0.05)


def test_an_idle_guest_claiming_thousands_of_switches_is_host_only():
    # 0.2 ms of CPU a second, 50 wake-ups: about 50 switches, then 5000.
    guest = Guest(steady(0.0002), switches_per_cpu_s=1000.0, wakeups=50.0)
    sampler, out = run(guest, 4)
    assert out[-1].mode == sampler_mod.MODE_GUEST
    guest.lie_switches = 100.0
    _, out = run(guest, 2, sampler, start=104.0)
    assert out[-1].mode == sampler_mod.MODE_HOST_ONLY
    assert 'context switches' in out[-1].reason


def test_a_guest_that_keeps_lying_a_little_is_caught_and_stays_caught():
    guest = Guest(steady(1.0))
    guest.lie_util = 1.5
    _, out = run(guest, 15)
    modes = [r.mode for r in out[1:]]
    assert modes[-1] == sampler_mod.MODE_HOST_ONLY
    first = modes.index(sampler_mod.MODE_HOST_ONLY)
    assert first <= 5
    assert set(modes[first:]) == {sampler_mod.MODE_HOST_ONLY}


def test_bursts_out_of_phase_with_the_ticks_are_not_lies():
    # One-second bursts at 100 % of both vCPUs every four seconds, which
    # the guest's windows hold whole and the host's ticks split in two.
    def burst(t):
        return 2.0 if (t - 0.37) % 4.0 < 1.0 else 0.0
    _, out = run(Guest(burst, phase=0.37), 30, start=100.87)
    assert {r.mode for r in out[1:]} == {sampler_mod.MODE_GUEST}, \
        [r.reason for r in out if r.reason]


def test_one_torn_read_keeps_the_last_sample_two_mean_host_only():
    guest = Guest(steady(0.5))
    sampler, out = run(guest, 4)
    last = out[-1].sample
    guest.busy_reads = 1
    _, out = run(guest, 1, sampler, start=104.0)
    assert out[-1].mode == sampler_mod.MODE_GUEST
    assert out[-1].sample == last
    _, out = run(guest, 1, sampler, start=105.0)
    assert out[-1].mode == sampler_mod.MODE_GUEST
    guest.busy_reads = 2
    _, out = run(guest, 2, sampler, start=106.0)
    assert out[0].mode == sampler_mod.MODE_GUEST
    assert out[1].mode == sampler_mod.MODE_HOST_ONLY
    assert 'busy' in out[1].reason and '2 reads in a row' in out[1].reason
    _, out = run(guest, 1, sampler, start=108.0)
    assert out[-1].mode == sampler_mod.MODE_GUEST


def test_a_torn_read_before_any_sample_is_host_only():
    guest = Guest(steady(0.5))
    guest.busy_reads = 3
    _, out = run(guest, 3)
    assert [r.mode for r in out] == [sampler_mod.MODE_HOST_ONLY] * 2


def test_stale_stats_mean_host_only():
    guest = Guest(steady(0.5))
    sampler, _ = run(guest, 3)
    frozen = guest.sample(102.5)
    guest.sample = lambda t: frozen
    _, out = run(guest, 4, sampler, start=103.0)
    assert out[-1].mode == sampler_mod.MODE_HOST_ONLY
    assert 'stale' in out[-1].reason


def test_after_an_invalid_page_the_next_new_sample_is_used():
    # The sample on the page when it turns valid again may have been
    # there for any time: its window is unknown, so it is not used.
    guest = Guest(steady(0.5))
    sampler, _ = run(guest, 4)
    real = guest.observe

    def invalid(t):
        obs = real(t)
        return base.Observation(obs.time, obs.vcpu_cpu_ns, 0,
                                obs.vcpu_slices, 0, report.GuestReport(
                                    report.STATUS_INVALID, 'bad magic'))
    guest.observe = invalid
    _, out = run(guest, 1, sampler, start=104.0)
    assert out[-1].reason == 'invalid: bad magic' and out[-1].fault
    guest.observe = real
    _, out = run(guest, 4, sampler, start=105.0)
    assert out[0].mode == sampler_mod.MODE_HOST_ONLY
    assert 'not seen being published' in out[0].reason
    assert not out[0].fault
    assert {r.mode for r in out[1:]} == {sampler_mod.MODE_GUEST}


def test_a_host_only_sample_carries_the_steal_of_its_vcpu_threads():
    sampler = sampler_mod.Sampler()
    # 1.5 CPUs ran and 0.5 s of each second waited on a run queue.
    first = base.Observation(10.0, 0, 0, 0, 0, None, emulator_threads=3)
    second = base.Observation(12.0, int(3.0e9), int(1.0e9), 400,
                              int(1.0e9), None, emulator_wait_ns=int(2e8),
                              emulator_threads=3)
    assert sampler.rates('g', first) is None
    rates = sampler.rates('g', second)
    assert rates.mode == sampler_mod.MODE_HOST_ONLY
    assert rates.sample.host_only
    assert rates.sample.util == pytest.approx(150.0)
    assert rates.sample.steal == pytest.approx(0.5 / 2.0)
    assert rates.run_delay_ms == pytest.approx(500.0)
    # Its emulator threads' CPU is charged to it: half a CPU; and how
    # long they waited for one, and how many they are (their occupancy).
    assert rates.sample.emulator == pytest.approx(50.0)
    assert rates.sample.emulator_wait == pytest.approx(10.0)
    assert rates.sample.emulator_threads == 3
    # The vCPU threads' CPU and run delay as well, for the idle pool's
    # steal.
    assert rates.sample.vcpu_run == pytest.approx(150.0)
    assert rates.sample.vcpu_wait == pytest.approx(50.0)


def test_a_guest_mode_sample_has_no_steal():
    guest = Guest(steady(0.6))
    guest.wait_per_cpu = 0.25
    _, out = run(guest, 5)
    assert all(not r.sample.host_only for r in out[1:])
    assert all(r.sample.emulator == r.emulator_pct for r in out)
    # But the host's run delay of its vCPU threads, % of one CPU: 0.6
    # of a CPU ran, and waited a quarter of that.
    assert all(r.mode == sampler_mod.MODE_GUEST for r in out[2:])
    assert all(r.sample.vcpu_wait == pytest.approx(15.0) for r in out[1:])
    assert all(r.sample.vcpu_wait == pytest.approx(r.run_delay_ms / 10)
               for r in out[1:])
    # And the CPU they ran, whatever the guest says it was busy.
    assert all(r.sample.vcpu_run == pytest.approx(r.vcpu_pct)
               for r in out[1:])
    assert all(r.sample.vcpu_run == pytest.approx(60.0, rel=0.05)
               for r in out[2:])


def test_traffic_rates_cover_the_nics_seen_in_both_observations():
    sampler = sampler_mod.Sampler()

    def observe(t, nics):
        return base.Observation(t, int(t * 1e9), 0, 0, 0, None, nics={
            name: base.NicCounters(*c) for name, c in (nics or {}).items()
        } if nics is not None else None)

    def traffic(sample):
        return (sample.packets_in, sample.packets_out, sample.bytes_in,
                sample.bytes_out)

    assert sampler.rates('g', observe(10.0, None)) is None
    sample = sampler.rates('g', observe(12.0, {'tap1': (100, 50, 1, 2)}))
    assert traffic(sample.sample) == (None,) * 4
    # tap2 is plugged meanwhile: its counters from zero are not a rate.
    sample = sampler.rates('g', observe(14.0, {
        'tap1': (1100, 550, 2001, 4002), 'tap2': (800, 900, 8, 9)}))
    assert traffic(sample.sample) == (500.0, 250.0, 1000.0, 2000.0)
    # tap1 is unplugged: its counters leave the sum, not a negative rate.
    sample = sampler.rates('g', observe(16.0, {'tap2': (1000, 1000, 8, 9)}))
    assert traffic(sample.sample) == (100.0, 50.0, 0.0, 0.0)
    # One NIC replaced by another: nothing in both, no rate.
    sample = sampler.rates('g', observe(18.0, {'tap3': (5, 5, 5, 5)}))
    assert traffic(sample.sample) == (None,) * 4
    # One NIC, a counter reset: no negative rate, every rate a float.
    sample = sampler.rates('g', observe(20.0, {'tap3': (3, 9, 5, 7)}))
    assert traffic(sample.sample) == (0.0, 2.0, 0.0, 1.0)
    assert all(type(v) is float for v in traffic(sample.sample))


class Scripted:
    """A guest whose page says whatever its script says.

    Its vCPU threads run ``cpu`` of a CPU; ``page(tick)`` returns the
    page's (sample_count, util %, switches/s, interval s).
    """

    def __init__(self, page, cpu=0.001, vcpus=2):
        self.page = page
        self.cpu = cpu
        self.vcpus = vcpus

    def observe(self, tick, t):
        count, util, switches, interval = self.page(tick)
        sample = report.GuestSample(
            flags=layout.GUEST_FLAG_HOST_VALID, ack_target_seq=0,
            applied_target=0, online_vcpus=self.vcpus,
            present_vcpus=self.vcpus, online_cpus=tuple(range(self.vcpus)),
            sample_count=count, timestamp_ns=int(count * 1e9),
            interval_ns=int(interval * 1e9), util=util, steal=0.0,
            ctxsw_per_sec=int(switches), own_ctxsw_per_sec=0,
            host_errors=0, watchdog_fires=0)
        return base.Observation(
            t, int(self.cpu * t * 1e9), 0, int(50 * t), 0,
            report.GuestReport(report.STATUS_OK, '', sample))


def run_scripted(guest, ticks, start=100.0):
    sampler = sampler_mod.Sampler()
    out = []
    for i in range(ticks):
        rates = sampler.rates('g', guest.observe(i, start + i))
        if rates is not None:
            out.append(rates)
    return out


def believed(out, util):
    """Ticks on which the controller was told ``util`` or more."""
    return [i for i, r in enumerate(out)
            if r.mode == sampler_mod.MODE_GUEST and r.sample.util >= util]


def test_values_rewritten_without_a_new_sample_count_are_not_believed():
    # An idle guest (0.1 % of a CPU) publishes an honest sample every
    # other tick and, in between, rewrites it to 400 % and 5e6 switches/s
    # under the same sample count.
    def page(tick):
        count = 1 + tick // 2
        if tick % 2:
            return count, 400.0, 5e6, 1.0
        return count, 0.1, 60.0, 2.0
    out = run_scripted(Scripted(page), 60)
    assert believed(out, 100.0) == []
    lies = [r for r in out if r.sample.util < 1.0 and r.reason]
    assert lies and 'without a new sample count' in lies[0].reason


def test_a_sample_used_again_is_checked_again():
    # The same 40 % sample, never rewritten, used until it goes stale:
    # each tick it is used claims 0.4 vCPU-s that the host never saw.
    def page(tick):
        return 1 + tick // 3, 40.0, 100.0, 3.0
    out = run_scripted(Scripted(page), 30)
    assert believed(out, 40.0) == []


def test_a_claimed_sample_interval_of_an_hour_widens_nothing():
    # A new sample every tick, each saying it covers the last hour: 40 %
    # of that hour is no more plausible than 40 % of the last second.
    out = run_scripted(Scripted(lambda tick: (tick + 1, 40.0, 100.0,
                                              3600.0)), 60)
    assert believed(out, 40.0) == []
    assert out[-1].mode == sampler_mod.MODE_HOST_ONLY
    assert 'vCPU-s busy' in out[-1].reason


def test_a_claimed_sample_interval_of_a_microsecond_hides_nothing():
    # Two samples a tick, the newest saying it covers a microsecond: 400 %
    # and 5e6 switches/s of a microsecond are next to nothing, but they
    # are what the controller would be told for the whole tick.
    out = run_scripted(Scripted(lambda tick: (2 * tick + 2, 400.0, 5e6,
                                              1e-6)), 60)
    assert believed(out, 100.0) == []
    assert out[-1].mode == sampler_mod.MODE_HOST_ONLY


def test_an_honest_guest_published_around_the_host_s_reads_is_believed():
    # Its samples land just before or just after the host's reads: some
    # ticks see none new (the last is used again), some two.
    guest = Guest(steady(0.6), phase=0.0)
    real = guest.sample
    jitter = [0.02, -0.02, -0.02, 0.02, 0.02, 0.02, -0.02, 0.02, -0.02]

    def sample(t):
        return real(t + jitter[int(t) % len(jitter)])
    guest.sample = sample
    _, out = run(guest, 40)
    counts = [guest.sample(100.0 + i).sample_count for i in range(40)]
    steps = {b - a for a, b in zip(counts, counts[1:])}
    assert steps == {0, 1, 2}
    assert {r.mode for r in out[1:]} == {sampler_mod.MODE_GUEST}, \
        [r.reason for r in out if r.reason]


def test_a_fresh_latency_reaches_the_controller_in_guest_mode():
    guest = Guest(steady(0.6))
    guest.latency = lambda t: (1500, int(t * 2))
    _, out = run(guest, 6)
    assert out[-1].mode == sampler_mod.MODE_GUEST
    assert out[-1].sample.latency_us == 1500.0
    assert out[-1].latency.fresh


def test_a_latency_that_stops_moving_goes_stale():
    guest = Guest(steady(0.6))
    guest.latency = lambda t: (1500, min(int(t), 102))
    sampler = sampler_mod.Sampler(latency_stale_after=2.0)
    _, out = run(guest, 8, sampler)
    # Published last at 102: fresh to 104, stale after (at 101 the
    # guest's first sample is not checkable yet: host-only).
    assert [r.sample.latency_us for r in out] == \
        [None] + [1500.0] * 3 + [None] * 3
    assert out[-1].mode == sampler_mod.MODE_GUEST
    assert out[-1].latency.state == 'stale'
    sampler.latency_stale_after = 10.0
    assert sampler.rates('g', guest.observe(108.0)).sample.latency_us == \
        1500.0


def test_a_lying_guest_s_latency_is_not_used():
    # Its page is valid, its latency new and in bounds; its utilization
    # is a lie the host sees: host-only, and no latency.
    guest = Guest(steady(0.01))
    guest.lie_util = 50.0
    guest.latency = lambda t: (100000, int(t))
    _, out = run(guest, 6)
    assert out[-1].mode == sampler_mod.MODE_HOST_ONLY
    assert out[-1].latency.fresh
    assert out[-1].sample.latency_us is None


def test_a_module_without_latency_gives_none():
    _, out = run(Guest(steady(0.6)), 5)
    assert out[-1].mode == sampler_mod.MODE_GUEST
    assert out[-1].sample.latency_us is None


def test_the_statistics_of_a_page_read_again_are_compared_once(
        monkeypatch):
    # The page shows each sample for three reads, the same report (as
    # the channel gives it for unchanged bytes): its statistics are
    # taken when it is first seen and compared with no other sample.
    guest = Guest(steady(0.6))
    reports = {}

    def observe(t):
        obs = Guest.observe(guest, t)
        count = obs.guest.sample.sample_count
        kept = reports.setdefault(count, obs.guest)
        return base.Observation(obs.time, obs.vcpu_cpu_ns, 0,
                                obs.vcpu_slices, 0, kept)
    guest.observe = observe
    made = []
    real_stats = sampler_mod._stats

    def stats(sample):
        made.append(sample.sample_count)
        return real_stats(sample)
    monkeypatch.setattr(sampler_mod, '_stats', stats)
    _, out = run(guest, 12, tick=1.0 / 3)
    assert out[-1].mode == sampler_mod.MODE_GUEST
    assert made == sorted(set(made))
