"""Reasons: rules with values, rendered to the text operators read."""

import os

import pytest

from ufo_agent.controller import controller as ctl
from ufo_agent.controller import emulator
from ufo_agent.controller import hostonly
from ufo_agent.controller import plan
from ufo_agent.controller import predictor
from ufo_agent.controller import reason

# The controller reference: its page, and the QoS-target mode's.
DOCS = [os.path.join(os.path.dirname(__file__), '..', '..', '..', '..',
                     'doc', 'source', page)
        for page in ('controller.rst', 'controller-qos-target.rst')]


def test_a_walk_renders_where_it_started_then_where_it_stopped():
    walk = reason.of(predictor.PCU_HIGH, pcu=92.0, limit=80.0,
                     cores=1).after_all(reason.of(
                         predictor.THEN, reason=reason.of(
                             predictor.PCU_LOW, pcu=30.6, limit=40.0,
                             cores=3)))
    assert walk.rule == predictor.PCU_HIGH
    assert walk.rules() == [predictor.PCU_HIGH, predictor.THEN,
                            predictor.PCU_LOW]
    assert str(walk) == ('PCU 92% > 80% at 1 cores; then PCU 31% < 40% at '
                         '3 cores')


def test_context_before_and_after_joins_the_text():
    grow = reason.of(predictor.PCU_HIGH, pcu=300.0, limit=80.0, cores=1)
    grow = grow.before_all(reason.of(ctl.TRAFFIC, util=100.0, share=33.3))
    grow = grow.after_all(reason.of(ctl.DRAIN_CORES, extra=3, need=700.0))
    wait = reason.of(ctl.CONFIRM, action=plan.Action.GROW, cores=4,
                     agreed=1, needed=2, reason=grow)
    assert wait.find(ctl.DRAIN_CORES).values['extra'] == 3
    assert str(wait) == (
        'grow to 4 cores on 1 of 2 samples: util 100% answers 33% of its '
        'traffic; PCU 300% > 80% at 1 cores; 3 more for one tick to work '
        'off the backlog (700% to run)')


def test_a_pool_decision_names_its_rule_first():
    why = emulator.PoolDecision(2, 0.58, emulator.YIELD_TO_SHORT, (
        reason.of(emulator.SHORT_GUEST, vm='a', pcu=98.0),)).reason(['b'])
    why = why.after_all(reason.of(ctl.IDLE_POOL_SUPPLIED, got=2, wanted=3))
    assert str(why) == (
        'yield-to-short: emulator pool utilization 58%; emulator threads '
        'of b saturated; yields a core: a runs one core short of its '
        'committed cores at PCU 98%; idle pool supplied 2 of 3')


def test_host_only_steal_names_the_isolated_part_only_if_any():
    values = dict(steal=40.0, limit=5.0, cores=1)
    assert str(reason.of(hostonly.STEAL_HIGH, isolated=30.0, **values)) == \
        'steal 40% > 5% + 30% isolated at 1 cores'
    assert str(reason.of(hostonly.STEAL_HIGH, isolated=0.0, **values)) == \
        'steal 40% > 5% at 1 cores'


def test_the_decision_log_line_keeps_its_fields_and_ends_with_the_rule():
    line = str(plan.Decision(3.0, 'a', plan.Action.PARK, 2, 0,
                             reason.of(ctl.PAUSED)))
    # The functional tests and the demo read the log by these fields.
    assert line == 't=3.0 vm=a action=park cores=2->0 reason="paused" ' \
        'rule=paused'


def test_a_rule_is_defined_once():
    with pytest.raises(ValueError):
        reason.rule(predictor.PCU_HIGH, 'another text')


def test_every_rule_is_in_the_controller_reference():
    doc = ''
    for page in DOCS:
        with open(page) as f:
            doc += f.read()
    missing = [name for name in reason.rules()
               if '``%s``' % name not in doc]
    assert missing == []
