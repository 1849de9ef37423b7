"""New thresholds at run time (SIGHUP), keeping what every VM learned."""

import dataclasses

import pytest

from ufo_agent.controller import controller as ctl
from ufo_agent.controller import Controller
from ufo_agent.controller import ControllerConfig
from ufo_agent.controller import HostTopology
from ufo_agent.controller import VmSample
from ufo_agent.controller import VmSpec


def _learned():
    config = ControllerConfig(settle_time=0.0)
    controller = Controller(HostTopology.uniform(8, 2), config)
    controller.add_vm(VmSpec('web', 8, 'auto'))
    for t, util in enumerate((60.0, 90.0, 120.0, 150.0, 170.0)):
        controller.tick(float(t), {'web': VmSample(util, 20.0 * util)}, 5.0)
    return controller, config


def test_every_part_of_every_vm_uses_the_new_thresholds():
    controller, config = _learned()
    state = controller.vms['web']
    samples = dict(state.model.samples)
    new = dataclasses.replace(config, pcu_high=0.9, idle_after=30.0,
                              sf_threshold=0.2, classify_samples=9)
    controller.reconfigure(new)
    assert controller.config is new
    for part in (state.model, state.predictor, state.idle, state.vm_class):
        assert part.config is new
    assert state.model.threshold == 0.2
    assert state.model.samples == samples       # nothing learned is lost
    controller.tick(10.0, {'web': VmSample(100.0, 2000.0)}, 5.0)


@pytest.mark.parametrize('name,value', [
    ('tick_interval', 2.0), ('emulator_min_cores', 2),
    ('idle_pool_min_cores', 0), ('samples_per_model', 9),
    ('min_samples_to_fit', 4), ('util_resolution', 2.0)])
def test_options_that_shape_pools_or_models_cannot_change(name, value):
    controller, config = _learned()
    new = dataclasses.replace(config, pcu_high=0.9, **{name: value})
    with pytest.raises(ctl.ControllerError, match=name):
        controller.reconfigure(new)
    assert controller.config is config
    assert controller.vms['web'].predictor.config is config
