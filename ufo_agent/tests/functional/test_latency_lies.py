"""A guest that lies about its latency, beside a neighbour, on real guests.

Two Nova guests of two vCPUs on this two-CPU host, in the small-host
mode. The liar's flavor names a p99 target; a shell loop in it writes
a p99 a hundred times the target to the guest module
(/sys/kernel/ufo/latency_us) every second, whatever its load. The
neighbour has no target: the black-box rules size it. What the test
checks is seen from outside: /status and the agent's decision log.

The liar is sized by the black-box rules while it publishes nothing and
once its reports go stale (``[agent] latency_stale_after``); on its word
it holds its flavor at most, and only cores that no other guest's
committed demand wants: the neighbour under load takes them while the
lie goes on.
"""

import re
import signal
import time

import pytest

from ufo_tools.e2e import AgentProcess
from ufo_tools.e2e import brief
from ufo_tools.e2e import nova_guest
from ufo_tools.e2e import set_load
from ufo_tools.e2e import stable
from ufo_tools.e2e import vm_status

SMALL_HOST = {'controller__emulator_min_cores': '0',
              'controller__idle_pool_min_cores': '0'}
# 500 us requests: 4000/s keep two vCPUs busy, 60/s keep one 3% busy.
HIGH, LOW = 4000, 60
STABLE_S = 6.0
WATCH_S = 10.0
TARGET_US = 50000
LIE_US = 100 * TARGET_US
LATENCY_SPECS = {'ufo:latency_target_us': str(TARGET_US),
                 'ufo:latency_percentile': '99'}
LIE_PID = '/tmp/ufo-lie.pid'
LIE_FIFO = '/tmp/ufo-lie.fifo'
# What the black-box rules add before a decision's own reason on a guest
# with a target and no fresh latency (controller-qos-target.rst).
STALE_TEXT = 'no fresh latency from the guest'


@pytest.fixture(scope='module')
def guests(guest_artifacts):
    with nova_guest(name='liar', extra_specs=LATENCY_SPECS) as liar, \
            nova_guest(name='neighbour') as neighbour:
        yield liar, neighbour


def start_lying(guest, latency_us=LIE_US):
    """Publish ``latency_us`` every second from a shell loop in the guest.

    ``read -t`` waits the second without a fork (``sleep`` is one): an
    idle guest that writes stays under the idle mark (1 % of a CPU).
    """
    rc, out = guest.console.sh('echo %d > /sys/kernel/ufo/latency_us'
                               % latency_us)
    assert rc == 0, out
    rc, out = guest.console.sh(
        "rm -f %(fifo)s; mkfifo %(fifo)s && (sh -c 'echo $$ > %(pid)s; "
        "exec 3<>%(fifo)s; while :; do echo %(us)d > "
        "/sys/kernel/ufo/latency_us; read -t 1 x <&3; done' "
        ">/dev/null 2>&1 &)" % {'fifo': LIE_FIFO, 'pid': LIE_PID,
                                'us': latency_us})
    assert rc == 0, out


def stop_lying(guest):
    rc, out = guest.console.sh('kill $(cat %s)' % LIE_PID)
    assert rc == 0, out


def ruled_decisions(agent, uuid, since=0):
    """(action, old cores, new cores, reason, rule) of ``uuid``."""
    return [(action, int(old), int(new), why, rule)
            for action, old, new, why, rule in re.findall(
                r'vm=%s action=([\w-]+) cores=(\d+)->(\d+) reason="([^"]*)" '
                r'rule=([\w-]+)' % re.escape(uuid), agent.log_text()[since:])]


def log_mark(agent):
    return len(agent.log_text())


class Watch:
    """The liar beside a busy neighbour: conditions, and what always holds.

    On two cores the guests' committed demand is at most the liar's one
    core (black-box rules: an active guest commits one core; nothing its
    reports say commits more) and the neighbour's two, so at most one
    core goes unmet; a lie that committed a core would leave two.
    """

    def __init__(self, liar_uuid, neighbour_uuid):
        self.liar, self.neighbour = liar_uuid, neighbour_uuid

    def check(self, pred):
        def checked(status):
            liar = vm_status(status, self.liar) or {}
            neighbour = vm_status(status, self.neighbour) or {}
            assert status['pools']['shortfall_cores'] <= 1, \
                'the lie committed cores: %s' % brief(status)
            if neighbour.get('mode') == 'active':
                # Never more than an active guest's one core.
                assert liar.get('cores', 0) <= 1, \
                    'the liar holds a core of the neighbour\'s: %s' % \
                    brief(status)
            return pred(status)
        return checked

    def hold(self, agent, seconds):
        """Check every status for ``seconds``; the ticks seen."""
        check = self.check(self.lie_heard)
        ticks = set()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            status = agent.poll()
            if status:
                assert check(status), 'the lie went stale: %s' % \
                    brief(status)
                ticks.add(status['ticks'])
            time.sleep(0.5)
        return ticks

    def lie_heard(self, status):
        liar = vm_status(status, self.liar) or {}
        return liar.get('latency_state') == 'fresh' and \
            liar.get('latency_us') == LIE_US

    def neighbour_took_all(self, status):
        liar = vm_status(status, self.liar) or {}
        neighbour = vm_status(status, self.neighbour) or {}
        return self.lie_heard(status) and liar.get('cores') == 0 and \
            neighbour.get('mode') == 'active' and \
            neighbour.get('cores') == neighbour.get('online_vcpus') == 2


def test_a_lying_guest_gets_idle_cores_only_and_a_silent_one_black_box(
        guests, tmp_path):
    liar, neighbour = guests
    lid, nid = liar.dom.UUIDString(), neighbour.dom.UUIDString()

    def liar_at(cores, state, rule=None, stale_rule=False):
        def check(s):
            vm = vm_status(s, lid) or {}
            if rule is not None and vm.get('note_rule') != rule:
                return False
            if stale_rule and (vm.get('note_rule', 'latency-').startswith(
                    'latency-') or STALE_TEXT not in vm.get('note', '')):
                return False
            return vm.get('mode') == 'active' and \
                vm.get('latency_target_us') == TARGET_US and \
                vm.get('latency_state') == state and \
                vm.get('cores') == vm.get('online_vcpus') == cores
        return check

    set_load(liar, LOW)
    agent = AgentProcess(tmp_path, **SMALL_HOST).start()
    try:
        agent.wait(lambda s: all(
            (vm_status(s, u) or {}).get('channel') == 'proven'
            for u in (lid, nid)), timeout=60, what='both guests adopted')
        # The liar alone: the neighbour paused is parked, no cores.
        neighbour.dom.suspend()
        agent.wait(lambda s: (vm_status(s, nid) or {}).get('mode') == 'idle',
                   timeout=30, what='the paused neighbour parked')

        # (b) A target and no report: the black-box rules, one core at
        # the low load.
        agent.wait(stable(liar_at(1, 'absent', stale_rule=True), STABLE_S),
                   timeout=120, what='black-box rules on one core')

        # The lie: a violation grows it, to its flavor and no further.
        mark = log_mark(agent)
        start_lying(liar)
        status = agent.wait(
            stable(liar_at(2, 'fresh', rule='latency-flavor-max'), STABLE_S),
            timeout=120, what='the liar at its flavor on its word')
        vm = vm_status(status, lid)
        assert vm['latency_us'] == LIE_US and vm['wanted_cores'] == 2, vm
        grows = [d for d in ruled_decisions(agent, lid, mark) if d[2] > d[1]]
        assert grows and grows[0][4] == 'latency-violation', agent.log

        # (b) Silent again: after latency_stale_after the black-box rules
        # decide, and give it what they gave before the lie.
        mark = log_mark(agent)
        stop_lying(liar)
        agent.wait(stable(liar_at(1, 'stale', stale_rule=True), STABLE_S),
                   timeout=120, what='black-box rules again, on one core')
        shrinks = [d for d in ruled_decisions(agent, lid, mark)
                   if d[2] < d[1]]
        assert shrinks and all(STALE_TEXT in why and
                               not rule.startswith('latency-')
                               for _, _, _, why, rule in shrinks), agent.log

        # (a) The liar idle and lying again: on its word it holds its
        # flavor while nobody else wants a core ...
        mark = log_mark(agent)
        start_lying(liar)
        set_load(liar, 0)
        agent.wait(liar_at(2, 'fresh', rule='latency-flavor-max'),
                   timeout=60, what='the idle liar on idle cores')
        # ... and the neighbour's committed demand, back under load, takes
        # them while the lie stands.
        neighbour.dom.resume()
        set_load(neighbour, HIGH)
        watch = Watch(lid, nid)
        agent.wait(watch.check(watch.neighbour_took_all), timeout=150,
                   what='both cores to the neighbour')
        # The neighbour's own rules may give a core back meanwhile (and
        # the liar take it while nobody wants it): what must hold, holds.
        assert len(watch.hold(agent, WATCH_S)) >= WATCH_S / 2
        squeezed = [why for _, old, new, why, _ in
                    ruled_decisions(agent, lid, mark) if new < old]
        committed = [int(c) for why in squeezed
                     for c in re.findall(r'wanted (\d+) committed', why)]
        # Its one core went to the neighbour's committed demand; the lie
        # had committed nothing more.
        assert committed and max(committed) == 1, agent.log
        assert agent.signal(signal.SIGTERM) == 0
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()
        if neighbour.dom.info()[0] == neighbour.libvirt.VIR_DOMAIN_PAUSED:
            neighbour.dom.resume()
        for guest in guests:
            set_load(guest, 0)
        liar.console.sh('kill $(cat %s) 2>/dev/null; true' % LIE_PID)
