"""The mechanism ablation's configurations."""

import dataclasses

from ufo_sim.calibration import ablation
from ufo_sim.engine import HostSpec


def test_each_configuration_switches_off_exactly_the_others():
    configs = dict(ablation.configurations())
    everything = {o for opts in ablation.MECHANISMS.values() for o in opts}
    assert set(configs['none']) == everything
    assert configs['all'] == ()
    for name, opts in ablation.MECHANISMS.items():
        alone = set(configs['only ' + name])
        assert alone == everything - set(opts)
    assert len(configs) == len(ablation.MECHANISMS) + 2


def test_every_configuration_is_a_valid_host():
    for _, opts in ablation.configurations():
        spec = dataclasses.replace(HostSpec(), **dict(opts))
        assert len(spec.core_params()) == len(HostSpec().core_params())


def test_switched_off_mechanisms_change_nothing_else():
    spec = dataclasses.replace(HostSpec(), **dict(
        dict(ablation.configurations())['none']))
    assert spec.cache_refill == 0 and spec.emu_wakeup == 0
    assert spec.smt_cross_slowdown == spec.smt_slowdown
    assert spec.smt_emu_slowdown == spec.smt_slowdown
    assert not spec.guest_locks
    assert spec.ctxsw == HostSpec().ctxsw
