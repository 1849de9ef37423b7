"""Each manager's decision on small cells of the real engine."""

import dataclasses
import math

from ufo_sim.managers import cell as cell_mod
from ufo_sim.managers import default
from ufo_sim.managers import dyniso
from ufo_sim.managers import oracle
from ufo_sim.managers import registry
from ufo_sim.managers import static
from ufo_sim.managers import ufo

FAST = cell_mod.Settings(warmup=2.0, measure=10.0, converge=12, judge=3)


def _cell(*loads, app='memcached'):
    return cell_mod.Cell(tuple(cell_mod.VmLoad(app, x) for x in loads))


def test_default_finds_the_smallest_shared_set():
    light = default.evaluate(_cell(0.1, 0.1), FAST)
    heavy = default.evaluate(_cell(0.2, 0.2), FAST)
    assert light.qos_met and heavy.qos_met
    assert light.cpus < heavy.cpus <= 16
    assert light.cpus == 2 * light.detail['shared_cores']
    # Bisection proved the count: one core fewer fails.
    assert not default.run_shared(_cell(0.2, 0.2), FAST,
                                  heavy.detail['shared_cores'] - 1).all_ok


def test_default_reports_an_impossible_cell():
    r = default.evaluate(_cell(1.0, 1.0), FAST)
    assert not r.qos_met and r.cpus is None
    assert r.detail['trials'] == [8]


def test_static_costs_the_flavors_plus_the_shared_core():
    r = static.evaluate(_cell(0.1, 0.1), FAST)
    assert r.cpus == 8 + 8 + 2
    assert r.detail['over_budget'] and r.qos_met


def test_oracle_isolates_and_beats_a_full_allocation():
    r = oracle.evaluate(_cell(0.2, 0.2), FAST)
    assert r.qos_met
    counts, emu = r.detail['vm_cores'], r.detail['emulator_cores']
    assert r.cpus == 2 * (sum(counts) + emu) <= 16
    assert 1 <= emu and all(1 <= c <= 4 for c in counts)
    # The allocation it returns holds QoS when run on its own.
    assert oracle.run_isolated(_cell(0.2, 0.2), FAST, counts, emu,
                               salt='check').all_ok
    impossible = oracle.evaluate(_cell(1.0, 1.0), FAST)
    assert impossible.cpus is None and not impossible.qos_met


def test_dyniso_shrinks_idle_vms_from_the_even_split():
    # Shrinking to 2 cores each overshoots once before it settles.
    r = dyniso.evaluate(_cell(0.1, 0.1), dataclasses.replace(FAST,
                                                             converge=30))
    assert r.qos_met
    assert r.cpus < 16
    assert sum(r.detail['vm_cores']) * 2 <= r.cpus


def test_ufo_hands_back_cores_at_light_load():
    r = ufo.evaluate(_cell(0.1, 0.1), FAST)
    assert r.qos_met
    assert r.cpus < 16
    # #vCPUs == #pCPUs for each VM with cores.
    assert r.detail['online'] == [2 * c for c in r.detail['vm_cores']]


def test_registry_and_determinism():
    assert set(registry.MANAGERS) == {'default', 'dyniso', 'static', 'ufo',
                                      'ufo-host-only', 'oracle'}
    a = registry.evaluate('dyniso', _cell(0.3, 0.1), FAST)
    b = registry.evaluate('dyniso', _cell(0.3, 0.1), FAST)
    assert a == b
    other = registry.evaluate(
        'dyniso', _cell(0.3, 0.1),
        cell_mod.Settings(**{**FAST.__dict__, 'seed': 2}))
    assert other.p99_us != a.p99_us
    assert all(math.isfinite(x) for x in a.p99_us)
