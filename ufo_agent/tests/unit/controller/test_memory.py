"""A VM's memories between ticks are frozen values, replaced whole."""

import dataclasses

import pytest

from ufo_agent.controller import Controller
from ufo_agent.controller import HostTopology
from ufo_agent.controller import memory
from ufo_agent.controller import plan as plan_mod
from ufo_agent.controller import VmSample
from ufo_agent.controller import VmSpec


def _shrunk():
    """A VM on flavor size whose light load shrinks it."""
    controller = Controller(HostTopology.uniform(8, 1))
    controller.add_vm(VmSpec('a', 4, 'lc'))
    for t in range(12):
        plan = controller.tick(float(t), {'a': VmSample(60.0, 4000.0)}, 5.0)
    return controller, plan


def test_a_shrink_and_the_last_step_are_frozen_values():
    controller, _ = _shrunk()
    state = controller.vms['a']
    assert isinstance(state.last_shrink, memory.Shrink)
    assert state.last_shrink.cores > len(state.cores)
    assert isinstance(state.last_action, memory.Step)
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.last_shrink.cores = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.last_action.action = plan_mod.Action.GROW


def test_a_plan_made_of_the_same_inputs_is_the_same_plan():
    controller, plan = _shrunk()
    state = controller.vms['a']
    again = controller._vm_plan(state, plan.shared_cpus,
                                len(plan.shared_cpus))
    assert again is plan.vms['a']
    assert state.plan_inputs.cores == plan.vms['a'].cores
