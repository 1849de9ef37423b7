"""The mechanism ablation's configurations."""

import dataclasses

from ufo_sim.calibration import ablation
from ufo_sim.engine import HostSpec
from ufo_sim import profiles


def _configs():
    return {name: (host, prof)
            for name, host, prof in ablation.configurations()}


def test_each_configuration_switches_off_exactly_the_others():
    configs = _configs()
    everything = {o for opts in ablation.MECHANISMS.values() for o in opts}
    per_profile = {o for opts in ablation.PROFILE_OFF.values()
                   for o in opts}
    assert set(configs['none'][0]) == everything
    assert set(configs['none'][1]) == per_profile
    assert configs['all'] == ((), ())
    for name, opts in ablation.MECHANISMS.items():
        host, prof = configs['only ' + name]
        assert set(host) == everything - set(opts)
        assert set(prof) == per_profile - set(
            ablation.PROFILE_OFF.get(name, ()))
    assert len(configs) == len(ablation.MECHANISMS) + 2


def test_smt_by_type_off_includes_each_profiles_emulator_sensitivity():
    host, prof = _configs()['only cache']
    for p in profiles.LC_PROFILES:
        q = profiles.with_options(p, prof)
        assert q.smt_emu_sensitivity == 1.0
    assert any(p.smt_emu_sensitivity != 1.0 for p in profiles.LC_PROFILES)


def test_every_configuration_is_a_valid_host():
    for _, opts, prof in ablation.configurations():
        spec = dataclasses.replace(HostSpec(), **dict(opts))
        assert len(spec.core_params()) == len(HostSpec().core_params())
        for key, value in prof:
            assert profiles.parse_option('%s=%s' % (key, value)) == (
                key, value)


def test_switched_off_mechanisms_change_nothing_else():
    spec = dataclasses.replace(HostSpec(), **dict(
        _configs()['none'][0]))
    assert spec.cache_refill == 0 and spec.emu_wakeup == 0
    assert spec.smt_cross_slowdown == spec.smt_slowdown
    assert spec.smt_emu_slowdown == spec.smt_slowdown
    assert not spec.guest_locks
    assert spec.ctxsw == HostSpec().ctxsw
