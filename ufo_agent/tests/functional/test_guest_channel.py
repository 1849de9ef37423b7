"""The ufo_guest module in a real guest, driven through the shared page.

One 4-vCPU guest (TCG here, KVM where it works) runs the LC workload and
prints its /proc/stat every second; the tests run in file order on it and
each leaves it with a valid page, a live heartbeat and every vCPU online.
"""

import dataclasses
import os
import random
import re
import struct
import time

import pytest

from ufo_agent.channel import crosscheck
from ufo_agent.channel import layout
from ufo_agent.channel import report as channel_report
from ufo_agent.driver import base
from ufo_agent.hypervisor import procfs
from ufo_agent.service import sampler as sampler_mod
from ufo_tools import e2e
from ufo_tools import testguest

VCPUS = 4
WATCHDOG_MS = 3000
POLL_MS = 10
ALL = set(range(VCPUS))
RELOADS = 40


@pytest.fixture(scope='module')
def guest(guest_artifacts):
    g = testguest.TestGuest(
        vcpus=VCPUS, watchdog_ms=WATCHDOG_MS, poll_ms=POLL_MS,
        cmdline='ufo.stat=1 ufo.rate=300 ufo.svc_us=1000 ufo.workers=4')
    g.start()
    try:
        yield g
    finally:
        g.close()
        print('console log: %s' % g.log_path)


def wait_report(channel, pred, timeout=30.0, what='condition'):
    deadline = time.monotonic() + timeout
    report = None
    while time.monotonic() < deadline:
        report = channel.read_guest()
        if pred(report):
            return report
        time.sleep(0.02)
    raise AssertionError('timeout waiting for %s; last report %r'
                         % (what, report))


def set_and_ack(channel, n, timeout=60.0):
    t0 = time.monotonic()
    seq = channel.set_target(n)
    report, _ = channel.wait_ack(seq, timeout)
    return report, time.monotonic() - t0


def assert_alive(guest):
    """The guest answers, the module is loaded and CPU0 is online."""
    rc, out = guest.console.sh('grep -c ^ufo_guest /proc/modules')
    assert rc == 0 and out == ['1'], out
    cpus = guest.online_cpus()
    assert 0 in cpus and 1 <= len(cpus) <= VCPUS


def restore(guest, channel=None):
    channel = channel or guest.channel
    channel.initialize()
    guest.resume_heartbeat()
    report, _ = set_and_ack(channel, VCPUS)
    assert set(report.sample.online_cpus) == ALL
    return report


def test_binds_and_publishes(guest):
    ch = guest.channel
    first = wait_report(ch, lambda r: r.ok and r.sample.sample_count >= 1,
                        what='a first sample')
    second = wait_report(
        ch, lambda r: r.ok and r.sample.sample_count > first.sample.
        sample_count, what='a second sample')
    s = second.sample
    assert s.present_vcpus == VCPUS and s.online_vcpus == VCPUS
    assert s.online_cpus == tuple(range(VCPUS))
    assert s.host_valid and not s.watchdog
    assert 0.5e9 < s.interval_ns < 3e9
    assert s.timestamp_ns > first.sample.timestamp_ns
    state = guest.module_state()
    assert state['bound'] != 'none'
    assert state['host_valid'] == '1'


def _stat_series(lines):
    """(uptime, busy seconds, ctxt, pcount) from UFO-STAT console lines."""
    out = []
    rx = re.compile(r'UFO-STAT ([\d.]+) cpu ((?:\d+ ?)+) ctxt (\d+) '
                    r'pcount (\d+)')
    for line in lines:
        m = rx.search(line)
        if not m:
            continue
        f = [int(x) for x in m.group(2).split()]
        # user nice system idle iowait irq softirq ...: USER_HZ = 100
        busy = (f[0] + f[1] + f[2] + f[5] + f[6]) / 100.0
        out.append((float(m.group(1)), busy, int(m.group(3)),
                    int(m.group(4))))
    return out


def _interp(series, t, idx):
    for (t0, *a), (t1, *b) in zip(series, series[1:]):
        if t0 <= t <= t1:
            return a[idx] + (b[idx] - a[idx]) * (t - t0) / (t1 - t0)
    raise AssertionError('%.2f outside the /proc/stat series' % t)


def test_stats_agree_with_proc_stat(guest):
    ch = guest.channel
    start = guest.console.position
    samples = {}
    deadline = time.monotonic() + 14
    while time.monotonic() < deadline:
        r = ch.read_guest()
        assert r.ok, r
        samples[r.sample.sample_count] = r.sample
        time.sleep(0.1)
    series = _stat_series(guest.console.lines(start))
    assert len(series) >= 8, guest.console.lines(start)[-20:]
    # Whole samples that lie inside the /proc/stat series.
    chosen = [s for _, s in sorted(samples.items())
              if s.sample_count > 0 and
              s.timestamp_ns / 1e9 - s.interval_ns / 1e9 >= series[0][0] and
              s.timestamp_ns / 1e9 <= series[-1][0]]
    assert len(chosen) >= 6, (len(chosen), series[0][0], series[-1][0])
    counts = [s.sample_count for s in chosen]
    assert counts == list(range(counts[0], counts[0] + len(counts)))
    t_start = (chosen[0].timestamp_ns - chosen[0].interval_ns) / 1e9
    t_end = chosen[-1].timestamp_ns / 1e9
    span = sum(s.interval_ns for s in chosen) / 1e9
    util = sum(s.util * s.interval_ns for s in chosen) / 1e9 / span
    ctx = sum(s.ctxsw_per_sec * s.interval_ns for s in chosen) / 1e9 / span
    own = sum(s.own_ctxsw_per_sec * s.interval_ns
              for s in chosen) / 1e9 / span
    sched_in = sum(s.sched_in_per_sec * s.interval_ns
                   for s in chosen) / 1e9 / span
    proc_util = 100.0 * (_interp(series, t_end, 0) -
                         _interp(series, t_start, 0)) / (t_end - t_start)
    proc_ctx = (_interp(series, t_end, 1) -
                _interp(series, t_start, 1)) / (t_end - t_start)
    proc_in = (_interp(series, t_end, 2) -
               _interp(series, t_start, 2)) / (t_end - t_start)
    print('util module %.1f%% /proc/stat %.1f%%; ctxsw/s module %.0f '
          '(+%.0f own) /proc/stat %.0f; switched in/s module %.0f '
          '/proc/schedstat %.0f; window %.1fs'
          % (util, proc_util, ctx, own, proc_ctx, sched_in, proc_in,
             t_end - t_start))
    assert proc_util > 5, 'the workload does not load the guest'
    assert abs(util - proc_util) <= 0.10 * proc_util
    # The module's own switches are left out of ctxsw_per_sec.
    assert own > 0
    assert abs(ctx - (proc_ctx - own)) <= 0.10 * (proc_ctx - own)
    assert abs((ctx + own) - proc_ctx) <= 0.10 * proc_ctx
    # Switches into a thread: the tasks /proc/schedstat saw arrive, less
    # the module's own arrivals (half its switches), and fewer than all
    # switches on a guest that idles.
    assert all(s.sched_in_per_sec is not None for s in chosen)
    assert abs(sched_in - (proc_in - own / 2)) <= 0.10 * sched_in
    assert sched_in < 0.9 * ctx


def _vcpu_observer(guest):
    """Observations of the guest's vCPU threads, as the driver makes them."""
    with open('/run/libvirt/qemu/%s.pid' % guest.name) as handle:
        pid = int(handle.read())
    threads = procfs.qemu_threads(pid)
    assert len(threads.vcpus) == VCPUS, threads

    def observe():
        now = time.monotonic()
        report = guest.channel.read_guest()         # the page first
        cpu = wait = slices = 0
        for tid in threads.vcpus.values():
            stat = procfs.schedstat(pid, tid)
            cpu += stat.cpu_ns
            wait += stat.wait_ns
            slices += stat.slices
        return base.Observation(now, cpu, wait, slices, 0, report)
    return observe


def _lie(obs, make):
    """``obs`` with the guest's claims changed by ``make(sample)``."""
    sample = obs.guest.sample
    sample = dataclasses.replace(sample, **make(sample))
    return dataclasses.replace(obs, guest=dataclasses.replace(
        obs.guest, sample=sample))


def _crosscheck_phase(guest, seconds, lies):
    """Feed real observations to an honest sampler and to lying ones.

    Returns (honest rates, {lie: rates}, first and last observation).
    """
    observe = _vcpu_observer(guest)
    honest = sampler_mod.Sampler()
    liars = {name: sampler_mod.Sampler() for name in lies}
    out, lied = [], {name: [] for name in lies}
    first = last = None
    for _ in range(seconds):
        obs = observe()
        assert obs.guest.ok, obs.guest
        first = first or obs
        last = obs
        rates = honest.rates('g', obs)
        if rates is not None:
            out.append(rates)
        for name, make in lies.items():
            rates = liars[name].rates('g', _lie(obs, make))
            if rates is not None:
                lied[name].append(rates)
        time.sleep(1.0)
    return out, lied, first, last


def _print_phase(name, out, first, last):
    span = last.time - first.time
    cpu = (last.vcpu_cpu_ns - first.vcpu_cpu_ns) / span / 1e7
    wait = (last.vcpu_wait_ns - first.vcpu_wait_ns) / span / 1e7
    slices = (last.vcpu_slices - first.vcpu_slices) / span
    util = sum(r.sample.util for r in out) / len(out)
    switches = sum(r.sample.sf for r in out) / len(out)
    own = last.guest.sample.own_ctxsw_per_sec
    print('%s: guest util %.1f%%, ctxsw %.0f/s (+%d own); vCPU threads '
          'cpu %.1f%%, wait %.1f%%, scheduled in %.0f/s; switch bound '
          '%.0f/s' % (name, util, switches, own, cpu, wait, slices,
                      crosscheck.switch_limit(crosscheck.HostUsage(
                          (cpu + wait) / 100.0, cpu / 100.0, slices))))


def test_crosscheck_accepts_the_real_guest_and_catches_lies(guest):
    """The host-side bounds against a real guest, busy and then idle.

    Every tick an honest sampler must keep the guest in guest mode; the
    same observations with the guest's claims inflated beyond what its
    vCPU threads did must not. The numbers are printed: under TCG the
    vCPU threads run much more than the guest (emulation), under KVM about
    as much.
    """
    busy, lied, first, last = _crosscheck_phase(guest, 14, {
        'util x10': lambda s: dict(util=min(10 * s.util,
                                            100.0 * s.online_vcpus))})
    _print_phase('busy', busy, first, last)
    # The first sample's window began before the sampler's first read:
    # not checkable, so host-only.
    assert {r.mode for r in busy[1:]} == {sampler_mod.MODE_GUEST}, \
        [r.reason for r in busy if r.reason]
    assert lied['util x10'][-1].mode == sampler_mod.MODE_HOST_ONLY
    print('util x10: %s' % lied['util x10'][-1].reason)
    e2e.set_load(guest, 0)
    try:
        time.sleep(2)
        # Under TCG the threads of an idle guest still run a few percent
        # of a CPU: claims beyond what that allows.
        idle, lied, first, last = _crosscheck_phase(guest, 14, {
            'every vCPU busy': lambda s: dict(util=100.0 * s.online_vcpus),
            'ctxsw 10^7/s': lambda s: dict(ctxsw_per_sec=10 ** 7)})
        _print_phase('idle', idle, first, last)
        assert {r.mode for r in idle[1:]} == {sampler_mod.MODE_GUEST}, \
            [r.reason for r in idle if r.reason]
        for name, rates in sorted(lied.items()):
            assert rates[-1].mode == sampler_mod.MODE_HOST_ONLY, name
            print('%s: %s' % (name, rates[-1].reason))
    finally:
        e2e.set_load(guest, 300, svc_us=1000, workers=4)


def test_target_followed(guest):
    ch = guest.channel
    latencies = []
    for n in (3, 2, 1, 2, 3, 4, 1, 4):
        report, dt = set_and_ack(ch, n)
        latencies.append((n, dt))
        s = report.sample
        assert s.applied_target == n
        assert s.online_cpus == tuple(range(n))
        assert guest.online_cpus() == set(range(n))
    print('ack latency (target, ms): %s' % ', '.join(
        '%d:%.0f' % (n, dt * 1000) for n, dt in latencies))


def test_watchdog_onlines_every_vcpu(guest):
    ch = guest.channel
    set_and_ack(ch, 1)
    last_beat = guest.pause_heartbeat()
    try:
        report = wait_report(
            ch, lambda r: r.ok and r.sample.watchdog and
            r.sample.online_vcpus == VCPUS, timeout=30,
            what='the watchdog')
        elapsed = time.monotonic() - last_beat
        print('watchdog: every vCPU online %.2fs after the last heartbeat '
              '(watchdog %.1fs)' % (elapsed, WATCHDOG_MS / 1000.0))
        assert elapsed <= WATCHDOG_MS / 1000.0 + 1.0
        assert elapsed >= WATCHDOG_MS / 1000.0
        assert report.sample.watchdog_fires >= 1
        assert guest.online_cpus() == ALL
    finally:
        guest.resume_heartbeat()
    # Back under host control, the guest returns to the last target.
    report = wait_report(ch, lambda r: r.ok and not r.sample.watchdog and
                         r.sample.online_vcpus == 1, what='re-applying 1')
    restore(guest)


def _hostile_host_areas():
    H = layout
    base = dict(magic=H.HOST_MAGIC, abi_version=H.ABI_VERSION,
                heartbeat=1, target_vcpus=2, target_seq=1000, max_vcpus=4)

    def area(**kw):
        values = dict(base, **kw)
        return H.pack(H.HOST_FIELDS, H.HOST_STRUCT, values)
    return [
        ('target zero', area(target_vcpus=0, target_seq=1001)),
        ('target above present', area(target_vcpus=1000, target_seq=1002)),
        ('target u32 max', area(target_vcpus=0xFFFFFFFF, target_seq=1003)),
        ('seq backwards', area(target_vcpus=3, target_seq=5)),
        ('seq u32 max', area(target_vcpus=2, target_seq=0xFFFFFFFF)),
        ('seq stuck odd', area(seq=7, target_vcpus=1, target_seq=1004)),
        ('bad version', area(abi_version=99, target_vcpus=1,
                             target_seq=1005)),
        ('bad magic', area(magic=0xDEADBEEF, target_vcpus=1,
                           target_seq=1006)),
        ('max_vcpus lie', area(max_vcpus=0xFFFFFFFF, target_vcpus=3,
                               target_seq=1007, flags=0xFFFFFFFF,
                               reserved0=0xFFFFFFFF)),
    ]


def test_random_and_hostile_pages_are_harmless(guest):
    ch = guest.channel
    rnd = random.Random(1234)
    guest.pause_heartbeat()
    try:
        # Random bytes over the whole page, many times.
        for _ in range(30):
            ch.write_raw(0, bytes(rnd.getrandbits(8)
                                  for _ in range(layout.PAGE_SIZE)))
            time.sleep(0.05)
        assert_alive(guest)
        # Random bytes with the right magic and version: targets and
        # sequences are garbage but the host area is "valid".
        for _ in range(30):
            data = bytearray(rnd.getrandbits(8)
                             for _ in range(layout.HOST_SIZE))
            struct.pack_into('<III', data, 0, layout.HOST_MAGIC,
                             layout.ABI_VERSION, rnd.getrandbits(31) * 2)
            ch.write_raw(0, bytes(data))
            time.sleep(0.05)
        assert_alive(guest)
        for name, data in _hostile_host_areas():
            ch.write_raw(layout.HOST_OFFSET, data)
            time.sleep(0.3)
            assert_alive(guest)
        state = guest.module_state()
        assert int(state['host_errors']) >= 3, state
        online = guest.online_cpus()
        assert 0 in online
    finally:
        restore(guest)
    assert guest.online_cpus() == ALL


def test_rmmod_onlines_every_vcpu(guest):
    ch = guest.channel
    set_and_ack(ch, 1)
    assert guest.online_cpus() == {0}
    rc, out = guest.console.sh('rmmod ufo_guest', timeout=120)
    assert rc == 0, out
    assert guest.online_cpus() == ALL
    assert ch.read_guest().status == channel_report.STATUS_ABSENT
    rc, out = guest.console.sh(
        'insmod /lib/modules/ufo_guest.ko poll_ms=%d watchdog_ms=%d'
        % (POLL_MS, WATCHDOG_MS), timeout=120)
    assert rc == 0, out
    wait_report(ch, lambda r: r.ok, what='the module to bind again')
    report, _ = set_and_ack(ch, 2)
    assert guest.online_cpus() == {0, 1}
    restore(guest)


def test_module_reloads_under_load(guest):
    # Each first probe on sched_switch and each last one gone patches
    # __schedule. Before the test guest enabled that event on its kernel
    # command line, multi-threaded TCG hung one of the first twenty
    # reloads in each of two runs (ufo_tools.testguest.TCG_TEXT_PATCH_ONCE).
    ch = guest.channel
    insmod = 'insmod /lib/modules/ufo_guest.ko poll_ms=%d watchdog_ms=%d' % (
        POLL_MS, WATCHDOG_MS)
    for _ in range(RELOADS):
        rc, out = guest.console.sh('rmmod ufo_guest && ' + insmod,
                                   timeout=60)
        assert rc == 0, out
    wait_report(ch, lambda r: r.ok, what='the module to bind again')
    set_and_ack(ch, 2)
    assert guest.online_cpus() == {0, 1}
    restore(guest)


def test_hotplug_detach_attach(guest):
    tag = os.path.basename(guest.shm_path)
    # 1. Removing the bound device onlines every vCPU.
    set_and_ack(guest.channel, 1)
    guest.detach_shmem(guest.shm_name)
    deadline = time.monotonic() + 60
    while guest.module_state().get('bound') != 'none':
        assert time.monotonic() < deadline, 'device not released'
        time.sleep(0.5)
    deadline = time.monotonic() + 30
    while guest.online_cpus() != ALL:
        assert time.monotonic() < deadline, 'vCPUs not onlined'
        time.sleep(0.5)
    assert guest.channel.read_guest().status == channel_report.STATUS_ABSENT

    # 2. Another ivshmem device, without the UFO magic, is left alone.
    other = tag + '-other'
    guest.attach_shmem(other)
    deadline = time.monotonic() + 60
    while True:
        rc, out = guest.console.sh('dmesg | grep -c "no UFO host magic"')
        if rc == 0 and int(out[0]) >= 1:
            break
        assert time.monotonic() < deadline, 'the other device never probed'
        time.sleep(0.5)
    assert guest.module_state()['bound'] == 'none'

    # 3. A hot-attached UFO device binds and is followed.
    name = tag + '-new'
    new = guest.new_channel(name)
    guest.attach_shmem(name)
    guest.swap_channel(new)
    wait_report(new, lambda r: r.ok, timeout=60, what='binding the new one')
    report, _ = set_and_ack(new, 2)
    assert report.sample.online_cpus == (0, 1)
    assert guest.online_cpus() == {0, 1}
    restore(guest, new)
    assert_alive(guest)
