"""ufo-agent end to end under changing load, on a small host.

One Nova guest (two vCPUs) runs the LC workload, started and stopped from
its serial console. ufo-agent manages every host CPU in the small-host
mode (``emulator_min_cores = 0``, ``idle_pool_min_cores = 0``), so that
on a two-CPU test machine the guest can hold one core or two. What the
tests check is seen from outside: /status, libvirt's live pins and the
guest's own online CPUs.
"""

import re
import signal
import time

import pytest

from ufo_tools.e2e import AgentProcess
from ufo_tools.e2e import host_online_cpus
from ufo_tools.e2e import live_pins
from ufo_tools.e2e import nova_guest
from ufo_tools.e2e import set_load
from ufo_tools.e2e import stable as e2e_stable
from ufo_tools.e2e import vm_status


WATCHDOG_MS = 3000
SMALL_HOST = {'controller__emulator_min_cores': '0',
              'controller__idle_pool_min_cores': '0'}
# 500 us requests: 4000/s keep two vCPUs busy, 60/s keep one 3% busy.
HIGH, LOW = 4000, 60
STABLE_S = 6.0
# The flavor names a p99 target; the guest is judged on it only while its
# workload publishes (the tests before the last do not: black-box rules).
# At 60 requests/s a second's p99 is its slowest request: on a test
# machine busy with other work one preempted vCPU put it at 55 ms. On
# one core at 4000/s the queue grows by seconds a second.
TARGET_US = 200000
LATENCY_SPECS = {'ufo:latency_target_us': str(TARGET_US),
                 'ufo:latency_percentile': '99'}


@pytest.fixture(scope='module')
def guest(guest_artifacts):
    with nova_guest(watchdog_ms=WATCHDOG_MS, extra_specs=LATENCY_SPECS) as g:
        yield g


def cpus_of(text):
    return {int(c) for c in text.split(',') if c}


def stable(pred, seconds=STABLE_S):
    return e2e_stable(pred, seconds)


def agreed_view(agent, guest, uuid, timeout=20.0):
    """Wait until /status, libvirt's pins and the guest agree; return it."""
    deadline = time.monotonic() + timeout
    while True:
        status = agent.status()
        vm = vm_status(status, uuid)
        vcpu_pins, emulator_pins = live_pins(guest)
        online = guest.online_cpus()
        view = (vm, vcpu_pins, emulator_pins, online, status['pools'])
        if vcpu_pins == {frozenset(cpus_of(vm['cpus']))} and \
                emulator_pins == set(status['pools']['emulator_cpus']) and \
                online == set(range(vm['target_vcpus'])):
            return view
        if time.monotonic() > deadline:
            raise AssertionError('status, pins and guest disagree: %s'
                                 % (view,))
        time.sleep(0.5)


def decisions(agent, uuid, since=0):
    """(action, old cores, new cores) of ``uuid`` logged after ``since``."""
    return [decision[:3] for decision in ruled_decisions(agent, uuid, since)]


def ruled_decisions(agent, uuid, since=0):
    """(action, old cores, new cores, rule) of ``uuid`` after ``since``."""
    text = agent.log_text()[since:]
    return [(action, int(old), int(new), rule)
            for action, old, new, rule in re.findall(
                r'vm=%s action=([\w-]+) cores=(\d+)->(\d+) reason="[^"]*" '
                r'rule=([\w-]+)' % re.escape(uuid), text)]


def decision_log(agent):
    """The agent's decisions, for a failed assertion's message."""
    return ''.join(line for line in agent.log_text().splitlines(True)
                   if 'ufo_agent.decisions' in line)


def log_mark(agent):
    return len(agent.log_text())


def test_cores_and_online_vcpus_follow_the_load(guest, tmp_path):
    uuid = guest.dom.UUIDString()
    set_load(guest, LOW)
    agent = AgentProcess(tmp_path, **SMALL_HOST).start()
    try:
        for rate, cores in ((LOW, 1), (HIGH, 2), (LOW, 1)):
            mark = log_mark(agent)
            set_load(guest, rate)

            def holds(s, cores=cores):
                vm = vm_status(s, uuid) or {}
                return vm.get('mode') == 'active' and \
                    vm.get('cores') == cores and \
                    vm.get('target_vcpus') == cores and \
                    vm.get('online_vcpus') == cores

            agent.wait(stable(holds), timeout=150,
                       what='%d cores for %.0f s at %d requests/s'
                       % (cores, STABLE_S, rate))
            vm, vcpu_pins, _, online, _ = agreed_view(agent, guest, uuid)
            # #vCPUs == #pCPUs, on CPUs the guest holds alone.
            assert len(cpus_of(vm['cpus'])) == vm['target_vcpus'] == \
                len(online) == cores
            if rate == HIGH:
                # The load, not the cold start, moved it: a change up
                # after the load went up.
                assert any(new > old for _, old, new in
                           decisions(agent, uuid, mark)), decision_log(agent)
            elif mark:
                assert any(new < old for _, old, new in
                           decisions(agent, uuid, mark)), decision_log(agent)
        assert agent.signal(signal.SIGTERM) == 0
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()
        set_load(guest, 0)
    # Given back with every vCPU online.
    vcpu_pins, _ = live_pins(guest)
    assert vcpu_pins == {frozenset(host_online_cpus())}


def emulator_decisions(agent, since):
    return decisions(agent, 'emulator', since)


# Marks of 10% and 6% of a core stand in for the 80% and 60% a
# production host's I/O would cross. The emulator threads of a TCG test
# guest, measured here every second: at the high load 10-18% of a CPU
# without a core of their own (dips to 6%), 17-29% with one; at the low
# load 2-4% either way, with bursts of a few seconds up to 8% (18% now
# and then). A low mark of 3% sat on the low load's level: a slower host
# kept the pool for minutes.
STAND_IN_BAND = {'controller__emulator_util_high': '0.10',
                 'controller__emulator_util_low': '0.06'}


def settle_at_low_load(agent, uuid):
    """Wait for one core and an empty emulator pool at the low load."""
    agent.wait(stable(
        lambda s: (vm_status(s, uuid) or {}).get('cores') == 1 and
        s['pools']['emulator_cores'] == 0), timeout=150,
        what='one core and an empty emulator pool at low load')


def start_at_low_load(guest, tmp_path, **options):
    """The agent with the stand-in band, settled: one core, no pool."""
    uuid = guest.dom.UUIDString()
    set_load(guest, LOW)
    agent = AgentProcess(tmp_path, **STAND_IN_BAND, **SMALL_HOST,
                         **options).start()
    try:
        settle_at_low_load(agent, uuid)
    except BaseException:
        if agent.proc.poll() is None:
            agent.proc.kill()
        set_load(guest, 0)
        raise
    return agent


def test_emulator_pool_grows_with_io_load_and_shrinks_back(guest, tmp_path):
    # The band alone: on this small host the grow takes a core the guest
    # committed, and the full-host mark (95 % of a core) is far above a
    # TCG guest's I/O.
    uuid = guest.dom.UUIDString()
    agent = start_at_low_load(guest, tmp_path,
                              controller__emulator_util_overload='0')
    try:
        _, _, emulator_pins, _, pools = agreed_view(agent, guest, uuid)
        # No core of their own: the emulator threads use the shared CPUs
        # (the idle core here).
        assert emulator_pins == set(pools['shared_cpus']) == \
            set(pools['idle_cpus'])
        mark = log_mark(agent)
        set_load(guest, HIGH)
        agent.wait(stable(lambda s: s['pools']['emulator_cores'] == 1),
                   timeout=120, what='the emulator pool to grow')
        vm, vcpu_pins, emulator_pins, _, pools = agreed_view(agent, guest,
                                                             uuid)
        # Counters from the real threads' schedstat.
        assert vm['emulator_run_delay_seconds'] >= 0.0
        assert vm['emulator_cpu_seconds'] > 0.0
        assert emulator_pins == set(pools['emulator_cpus'])
        assert len(emulator_pins) == 1
        assert not emulator_pins & cpus_of(vm['cpus'])
        assert ('emulator-grow', 0, 1) in emulator_decisions(agent, mark)
        mark = log_mark(agent)
        set_load(guest, LOW)
        agent.wait(stable(lambda s: s['pools']['emulator_cores'] == 0),
                   timeout=120, what='the emulator pool to shrink')
        _, _, emulator_pins, _, pools = agreed_view(agent, guest, uuid)
        assert emulator_pins == set(pools['shared_cpus'])
        assert ('emulator-shrink', 1, 0) in emulator_decisions(agent, mark)
        assert agent.signal(signal.SIGTERM) == 0
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()
        set_load(guest, 0)


YIELD_WATCH_S = 20.0
ASK_WATCH_S = 60.0
WATCH_ATTEMPTS = 3
# Rules by which a guest gives back a core for its own load, not the pool.
GUEST_LOAD_RULES = ('pred', 'too-light', 'pcu-low', 'sf-flat', 'sf-to-one',
                    'sf-unknown', 'steal-low', 'idle')


def band_holds_a_core(agent, status, since):
    """True if the pool holds a core the band grew it by since ``since``."""
    return status['pools']['emulator_cores'] > 0 and any(
        d[:3] == ('emulator-grow', 0, 1) and d[3] == 'band'
        for d in ruled_decisions(agent, 'emulator', since))


def rewhole_after_guest_shrink(agent, guest, uuid, since, whole):
    """Wait for the guest whole again after a shrink since ``since``.

    Allowed only if the guest's own load rule gave the core back (a busy
    test machine ran its vCPUs short of the high load), not the pool.
    The core it gave back is idle, and the band may grow the pool into
    it: the threads run above the stand-in high mark at the high load.
    Under the full-host mark the pool then gives it back only to a guest
    at the mark of its one CPU, which a busy machine may never let the
    guest reach. Then the load starts over from the low one.
    """
    shrinks = [d for d in ruled_decisions(agent, uuid, since)
               if d[2] < d[1]]
    assert shrinks and all(d[3] in GUEST_LOAD_RULES
                           for d in shrinks), decision_log(agent)
    status = agent.wait(
        stable(lambda s: whole(s) or band_holds_a_core(agent, s, since)),
        timeout=150, what='both cores back to the guest')
    if not whole(status):
        set_load(guest, LOW)
        settle_at_low_load(agent, uuid)
        set_load(guest, HIGH)
        agent.wait(stable(whole), timeout=150,
                   what='both cores to the guest after a new start')


def watch_whole(agent, whole, high):
    """The pool's utilization, read while the guest stays whole.

    Until the pool has read above ``high``, or ASK_WATCH_S. None as soon
    as the guest is not whole: the caller decides whether that was
    allowed.
    """
    utils = []
    start = time.monotonic()
    while True:
        elapsed = time.monotonic() - start
        asked = bool(utils) and max(utils) > high
        if elapsed >= ASK_WATCH_S or (elapsed >= YIELD_WATCH_S and asked):
            return utils
        status = agent.status()
        if not whole(status):
            return None
        utils.append(status['pools']['emulator_util'])
        time.sleep(0.5)


def test_a_full_host_leaves_the_guest_its_cores_under_the_mark(guest,
                                                               tmp_path):
    # The stand-in band, the full-host mark at its default (95 % of a
    # core). At the high load the band asks for a core, and on this
    # two-core host that core is one the guest committed: under the mark
    # the pool does not take it, or, if it took it before the guest
    # committed both, gives it back ("yields a core") and does not take
    # it again while the load stays.
    uuid = guest.dom.UUIDString()
    agent = start_at_low_load(guest, tmp_path)
    try:
        mark = log_mark(agent)
        set_load(guest, HIGH)

        def whole(s):
            vm = vm_status(s, uuid) or {}
            return vm.get('cores') == vm.get('target_vcpus') == \
                vm.get('online_vcpus') == 2 and \
                s['pools']['emulator_cores'] == 0

        agent.wait(stable(whole), timeout=150,
                   what='both cores to the guest, none to the pool')
        for _ in range(WATCH_ATTEMPTS):
            vm, _, _, online, _ = agreed_view(agent, guest, uuid)
            if len(online) == 2:
                break
            # Shrunk between the status and the pins.
            rewhole_after_guest_shrink(agent, guest, uuid, mark, whole)
        assert len(cpus_of(vm['cpus'])) == len(online) == 2
        pool = ruled_decisions(agent, 'emulator', mark)
        for i, grow in enumerate(pool):
            if grow[:3] != ('emulator-grow', 0, 1):
                continue
            # Taken while the guest had committed one core (one second
            # over the stand-in mark, most likely the serial console's
            # command, is enough), then given back: by the band once the
            # threads' load fell, or yielded once the guest ran one core
            # short at the mark.
            back = [d for d in pool[i + 1:]
                    if d[:3] == ('emulator-shrink', 1, 0)]
            assert back and back[0][3] in ('band', 'yield-to-short'), \
                decision_log(agent)
        if any(d[3] == 'yield-to-short' for d in pool):
            assert 'yields a core: %s runs one core short' % uuid in \
                agent.log_text()[mark:], decision_log(agent)
        # The band keeps asking (the threads run above its high mark
        # without a core of their own), and the pool stays empty. The
        # threads' load hovers near the stand-in mark, so the watch goes on
        # (up to ASK_WATCH_S) until the band has asked at least once.
        high = float(STAND_IN_BAND['controller__emulator_util_high'])
        for _ in range(WATCH_ATTEMPTS):
            watched = log_mark(agent)
            utils = watch_whole(agent, whole, high)
            if utils is not None:
                break
            # The guest gave a core back: watch again once it has both.
            rewhole_after_guest_shrink(agent, guest, uuid, watched, whole)
        assert utils is not None, 'the guest shrank on every watch'
        assert max(utils) > high, utils
        assert not [d for d in emulator_decisions(agent, watched)
                    if d[0] == 'emulator-grow'], decision_log(agent)
        assert agent.signal(signal.SIGTERM) == 0
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()
        set_load(guest, 0)


def test_a_latency_target_grows_on_violation_and_shrinks_with_slack(
        guest, tmp_path):
    # 4000 requests/s of 500 us need both vCPUs: on one core the queue,
    # and the p99 the workload publishes, grows past the target within
    # seconds. At 60/s the p99 is a few ms, under the target's slack.
    uuid = guest.dom.UUIDString()
    set_load(guest, HIGH, publish=99)
    agent = AgentProcess(tmp_path, **SMALL_HOST).start()
    try:
        def fresh_at(cores):
            def check(s):
                vm = vm_status(s, uuid) or {}
                return vm.get('latency_fresh') is True and \
                    vm.get('latency_target_us') == TARGET_US and \
                    vm.get('cores') == cores and \
                    vm.get('online_vcpus') == cores
            return check

        agent.wait(stable(fresh_at(2)), timeout=150,
                   what='two cores on published latencies at high load')
        mark = log_mark(agent)
        set_load(guest, LOW, publish=99)
        agent.wait(stable(fresh_at(1)), timeout=150,
                   what='one core with slack under the target')
        shrinks = [d for d in ruled_decisions(agent, uuid, mark)
                   if d[2] < d[1]]
        assert shrinks and all(rule == 'latency-slack-trial'
                               for _, _, _, rule in shrinks), \
            decision_log(agent)
        vm = vm_status(agent.status(), uuid)
        assert vm['latency_us'] < TARGET_US, vm
        mark = log_mark(agent)
        set_load(guest, HIGH, publish=99)
        agent.wait(stable(fresh_at(2)), timeout=150,
                   what='two cores again after the violation')
        grows = [d for d in ruled_decisions(agent, uuid, mark)
                 if d[2] > d[1]]
        assert grows and grows[0][3] == 'latency-violation', \
            decision_log(agent)
        assert agent.signal(signal.SIGTERM) == 0
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()
        set_load(guest, 0)
