"""A committed core lent to a probe denied on a full host (``probe_loan``).

Where the loan changes what the controller does, a test runs the same
situation with it off too and asserts the difference.
"""

from ufo_agent.controller import Controller
from ufo_agent.controller import ControllerConfig
from ufo_agent.controller import HostTopology
from ufo_agent.controller import VmSample
from ufo_agent.controller import VmSpec

# SF of 'b' on two and three cores: it falls 40 % one core smaller.
B_RATIO = 0.6


def _full_host(loan, sf_a_on_three, ticks=20, util_b=None):
    """7 cores, no SMT: a two-core pool beside two 4-vCPU guests.

    'a' runs 150 % (75 % of two cores) and probes for SF on three, where
    it is ``sf_a_on_three`` against 6000 on two. 'b' runs 170 % (85 % of
    two cores), grows to three on PCU and holds the host. The pool runs
    75 % of two cores: inside its band, and over the overload mark one
    core smaller, so it yields nothing. ``util_b(t)`` overrides b's load.
    Returns (pool, a, b) cores per tick and the decisions.
    """
    controller = Controller(HostTopology.uniform(7, 1),
                            ControllerConfig(settle_time=1.0,
                                             probe_loan=loan))
    controller.add_vm(VmSpec('a', 4, 'lc'))
    controller.add_vm(VmSpec('b', 4, 'lc'))
    history, decisions = [], []
    for t in range(ticks):
        a, b = (len(controller.vms[u].cores) for u in 'ab')
        load_b = util_b(t) if util_b else 170.0
        samples = {'a': VmSample(150.0, sf_a_on_three if a >= 3 else 6000.0),
                   'b': VmSample(load_b if b <= 2 else load_b - 5.0,
                                 10000.0 if b >= 3 else 10000.0 * B_RATIO)}
        plan = controller.tick(float(t), samples, 150.0)
        history.append((len(plan.emulator_cores),
                        len(plan.vms['a'].cores), len(plan.vms['b'].cores)))
        decisions.extend(plan.decisions)
    return history, decisions


def _moves(decisions, after=3.0):
    return [(d.vm, d.action.value, d.new) for d in decisions
            if d.time > after and d.old != d.new]


def test_off_a_denied_probe_waits_for_an_idle_core():
    history, decisions = _full_host(False, 12000.0)
    assert history[2:] == [(2, 2, 3)] * 18
    assert ('a', 'probe-denied', 2) in [
        (d.vm, d.action.value, d.new) for d in decisions]


def test_the_core_stays_with_the_guest_whose_sf_falls_more():
    # a's SF falls 50 % one core smaller, b's 40 %: a keeps b's core.
    history, decisions = _full_host(True, 12000.0)
    assert history[4:] == [(2, 3, 2)] * 16
    assert _moves(decisions) == [('a', 'probe', 3), ('b', 'shrink', 2)]
    verdict = [d for d in decisions if d.vm == 'b' and d.time == 5.0]
    assert 'stays there: its SF(2)/SF(3) = 0.50 against 0.60' in \
        verdict[0].reason
    # b's PCU (85 % of two cores) still asks for three: not committed.
    assert not any(d.action.value == 'squeeze' for d in decisions)


def test_a_probe_that_does_not_keep_the_core_gives_it_back():
    # SF(2)/SF(3) = 0.75: a would not keep three cores even if idle.
    history, decisions = _full_host(True, 8000.0)
    assert history[4] == (2, 3, 2)
    assert history[5:] == [(2, 2, 3)] * 15
    assert _moves(decisions) == [('a', 'probe', 3), ('b', 'shrink', 2),
                                 ('a', 'revert', 2), ('b', 'grow', 3)]


def test_a_probe_the_lender_needs_more_gives_the_core_back_and_stays():
    # a's SF falls 35 %: past the 30 % rule, but less than b's 40 %. It
    # gives the core back and, its SF on three now known, asks for it
    # only as idle cores allow: no squeeze, no second loan.
    history, decisions = _full_host(True, 6000.0 / 0.65)
    assert history[5:] == [(2, 2, 3)] * 15
    assert _moves(decisions) == [('a', 'probe', 3), ('b', 'shrink', 2),
                                 ('a', 'revert', 2), ('b', 'grow', 3)]
    back = [d for d in decisions if d.vm == 'a' and d.time == 5.0]
    assert 'gives back the core lent by b: SF(2)/SF(3) = 0.65 against ' \
        '0.60' in back[0].reason


def test_a_lender_that_lost_commits_its_core_again_once_its_load_moves():
    # b's load rises by a third at tick 10: its cession no longer holds,
    # it commits three cores again, and the overload rule splits the host.
    history, decisions = _full_host(
        True, 12000.0, util_b=lambda t: 170.0 if t < 10 else 230.0)
    assert history[5:11] == [(2, 3, 2)] * 6
    assert history[11:] == [(2, 2, 3)] * 9
    assert [m for m in _moves(decisions, after=10.0)] == [
        ('a', 'squeeze', 2), ('b', 'grow', 3)]
