"""Persisted learned models: round trip, versioning, corruption, pruning."""

import dataclasses
import json
import logging
import os

import pytest

from ufo_agent.controller import Controller
from ufo_agent.controller import HostTopology
from ufo_agent.controller import VmSample
from ufo_agent.controller import VmSpec
from ufo_agent import state
from ufo_agent.tests.unit.controller import synthetic as syn


def _learned_controller():
    controller = Controller(HostTopology.uniform(16, 2))
    vm = syn.nginx(phases=[(0, 0.2), (30, 0.4), (60, 0.6), (90, 0.8)],
                   noise=0.04, seed=3)
    controller.add_vm(VmSpec(vm.uuid, vm.vcpus, 'lc'))
    syn.Driver(controller, [vm], emulator_busy=lambda t: 30.0).run(0, 119)
    return controller


def test_learned_models_survive_a_restart(tmp_path):
    before = _learned_controller()
    store = state.StateStore(str(tmp_path))
    store.save('nginx', before.export_learned('nginx', now=119.0))
    # A new agent process: its clock starts elsewhere.
    after = Controller(HostTopology.uniform(16, 2))
    after.add_vm(VmSpec('nginx', 8, 'lc'), store.load('nginx'), now=5000.0)
    old, new = before.vms['nginx'].model, after.vms['nginx'].model
    assert set(new.fitted()) == set(old.fitted()) and new.fitted()
    for cores, curve in old.fitted().items():
        assert new.fitted()[cores](250.0) == curve(250.0)
    assert new.pred == old.pred
    # Sample ages were kept: they expire as they would have.
    expiry = after.config.sample_max_age
    new.expire(5000.0 + expiry)
    assert not new.fitted()


def test_mismatched_or_corrupt_state_is_dropped(tmp_path):
    before = _learned_controller()
    learned = before.export_learned('nginx', now=119.0)
    other = Controller(HostTopology.uniform(16, 2))
    other.add_vm(VmSpec('nginx', 16, 'lc'), learned)   # resized flavor
    assert not other.vms['nginx'].model.fitted()
    broken = json.loads(json.dumps(learned))
    broken['model']['samples']['2'][0][0] = 'NaN'
    third = Controller(HostTopology.uniform(16, 2))
    third.add_vm(VmSpec('nginx', 8, 'lc'), broken)
    assert not third.vms['nginx'].model.fitted()
    hostile = json.loads(json.dumps(learned))
    hostile['model']['samples'] = {'999': [[1, 2, 3]]}
    fourth = Controller(HostTopology.uniform(16, 2))
    fourth.add_vm(VmSpec('nginx', 8, 'lc'), hostile)
    assert not fourth.vms['nginx'].model.samples


def _learned_since(model, now):
    """True if every SF sample the model holds was recorded at ``now``."""
    return all(r.time >= now for store in model.samples.values()
               for r in store.values())


def _next_sample(controller, now, sf_counts_idle):
    state_ = controller.vms['nginx']
    sample = dataclasses.replace(state_.last_sample,
                                 sf_counts_idle=sf_counts_idle)
    controller.tick(now, {'nginx': sample}, 30.0)


def test_a_guest_whose_sf_changes_its_count_is_learned_again():
    # The guest module was upgraded: SF no longer counts switches into
    # idle, up to half the old values; old and new must not be compared.
    controller = _learned_controller()
    state_ = controller.vms['nginx']
    assert state_.sf_counts_idle is False and state_.model.samples
    _next_sample(controller, 120.0, sf_counts_idle=False)
    assert not _learned_since(state_.model, 120.0)  # same count: kept
    _next_sample(controller, 121.0, sf_counts_idle=True)
    assert _learned_since(state_.model, 121.0) and not state_.probe_cache
    assert state_.sf_counts_idle is True


def test_state_learned_before_switch_ins_is_read_as_every_switch():
    learned = _learned_controller().export_learned('nginx', now=119.0)
    assert learned['sf_counts_idle'] is False
    learned.pop('sf_counts_idle')               # a checkpoint from before
    after = Controller(HostTopology.uniform(16, 2))
    after.add_vm(VmSpec('nginx', 8, 'lc'), learned, now=5000.0)
    state_ = after.vms['nginx']
    assert state_.sf_counts_idle is True and state_.model.samples
    sample = VmSample(250.0, 5000.0, sf_counts_idle=False)
    after.tick(5001.0, {'nginx': sample}, 30.0)
    assert _learned_since(state_.model, 5001.0)


def test_a_checkpoint_that_does_not_restore_leaves_nothing_learned():
    learned = _learned_controller().export_learned('nginx', now=119.0)
    learned['flat_sf'] = True
    learned['model']['samples'] = {'999': [[1, 2, 3]]}
    after = Controller(HostTopology.uniform(16, 2))
    after.add_vm(VmSpec('nginx', 8, 'lc'), learned, now=5000.0)
    state_ = after.vms['nginx']
    assert not state_.model.samples and not state_.flat_sf
    assert state_.sf_counts_idle is None
    assert state_.model.threshold == after.config.sf_threshold


def test_forgetting_sf_drops_the_model_probe_record_and_trial():
    controller = _learned_controller()
    state_ = controller.vms['nginx']
    state_.flat_sf, state_.trial = True, object()
    state_.probe_cache[(2, 40)] = object()
    state_.forget_sf(controller.config, controller.ppc)
    assert not state_.model.samples and not state_.model.fitted()
    assert (state_.flat_sf, state_.trial, state_.probe_cache,
            state_.sf_counts_idle) == (False, None, {}, None)


def test_store_is_atomic_versioned_and_prunes(tmp_path):
    store = state.StateStore(str(tmp_path))
    store.save('a', {'x': 1})
    store.save('b', {'x': 2})
    store.save('a', {'x': 3})
    assert store.load('a') == {'x': 3}
    assert store.uuids() == ['a', 'b']
    (tmp_path / 'c.json').write_text('{"version": 99, "uuid": "c"}')
    (tmp_path / 'd.json').write_text('{not json')
    assert store.load('c') is None and store.load('d') is None
    assert store.load('missing') is None
    (tmp_path / '.tmp-leftover').write_text('partial')
    assert store.prune(['a']) == ['b', 'c', 'd']
    assert sorted(os.listdir(tmp_path)) == ['a.json']
    for bad in ('../etc/passwd', '', 'a/b'):
        try:
            store.save(bad, {})
        except ValueError:
            pass
        else:
            raise AssertionError('accepted uuid %r' % bad)


def _state_text(learned_json):
    return '{"version": 1, "uuid": "a", "learned": %s}' % learned_json


@pytest.mark.parametrize('text, reason', [
    (_state_text('{"vcpus": Infinity}'), 'Infinity is not a JSON number'),
    (_state_text('{"vcpus": -Infinity}'), '-Infinity is not a JSON number'),
    (_state_text('{"vcpus": NaN}'), 'NaN is not a JSON number'),
    ('[' * 100000 + ']' * 100000, 'nested too deep'),
    (_state_text('[' * 100000 + ']' * 100000), 'nested too deep'),
    ('[1, 2]', 'an array, not an object'),
    (_state_text('"x"'), 'its learned state is a string, not an object'),
    (_state_text('null'), 'its learned state is null, not an object'),
    ('{"version": 1, "uuid": "b", "learned": {}}', "saved for instance 'b'"),
    (b'\xff\xfe{', 'unreadable'),
])
def test_a_state_file_that_cannot_be_used_is_discarded_naming_it(
        tmp_path, caplog, text, reason):
    store = state.StateStore(str(tmp_path))
    path = tmp_path / 'a.json'
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with caplog.at_level(logging.WARNING, logger='ufo_agent.state'):
        assert store.load('a') is None
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert str(path) in record.getMessage()
    assert reason in record.getMessage()
    # Replaced by the next save, which loads again.
    store.save('a', {'x': 1})
    assert store.load('a') == {'x': 1}


def test_learned_numbers_too_large_for_a_float_are_dropped():
    learned = _learned_controller().export_learned('nginx', now=119.0)
    learned['model']['samples']['2'][0][0] = 10 ** 400
    after = Controller(HostTopology.uniform(16, 2))
    after.add_vm(VmSpec('nginx', 8, 'lc'), learned, now=5000.0)
    assert not after.vms['nginx'].model.samples


def test_the_store_never_writes_what_it_would_not_read(tmp_path):
    store = state.StateStore(str(tmp_path))
    store.save('a', {'x': 1})
    with pytest.raises(ValueError):
        store.save('a', {'x': float('inf')})
    assert store.load('a') == {'x': 1}
    assert sorted(os.listdir(tmp_path)) == ['a.json']


def test_the_in_flight_record_round_trips_and_is_gone_when_empty(tmp_path):
    record = state.StateStore(str(tmp_path)).in_flight_record()
    assert record.load() == {}
    record.save({'a': {'vcpu': frozenset({1, 2, 3, 7}),
                       'emulator': frozenset({0})},
                 'b': {'vcpu': frozenset()}})
    path = tmp_path / 'in-flight-pins.json'
    assert json.loads(path.read_text()) == {
        'version': 1, 'guests': {'a': {'emulator': '0', 'vcpu': '1-3,7'}}}
    assert record.load() == {'a': {'vcpu': frozenset({1, 2, 3, 7}),
                                   'emulator': frozenset({0})}}
    # Not a guest's learned state, never pruned as one.
    store = state.StateStore(str(tmp_path))
    assert store.uuids() == [] and store.prune([]) == []
    assert path.exists()
    record.save({})
    assert not path.exists() and record.load() == {}


def test_the_in_flight_record_directory_is_made_when_first_needed(
        tmp_path):
    record = state.InFlightRecord(str(tmp_path / 'state'))
    record.save({})
    assert not (tmp_path / 'state').exists()
    record.save({'a': {'vcpu': frozenset({4})}})
    assert record.load() == {'a': {'vcpu': frozenset({4})}}
    assert (tmp_path / 'state').stat().st_mode & 0o777 == 0o700


def _record(guests):
    return json.dumps({'version': 1, 'guests': guests})


@pytest.mark.parametrize('text, reason', [
    ('{"version": 2, "guests": {}}', 'format version 2, expected 1'),
    ('{"version": 1}', 'its guests are null, not an object'),
    ('{"version": 1, "guests": {}, "more": 1}', 'unknown field(s) more'),
    (_record({'../x': {'vcpu': '1'}}), "invalid instance uuid '../x'"),
    (_record({'a': {}}), 'guest a: an object, not an object of pinnings'),
    (_record({'a': ['1']}), 'guest a: an array, not an object of pinnings'),
    (_record({'a': {'io': '1'}}), "guest a: unknown pinning 'io'"),
    (_record({'a': {'vcpu': [1]}}), 'vcpu CPUs are an array, not a cpuset'),
    (_record({'a': {'vcpu': '1-x'}}), "invalid cpuset item '1-x'"),
    (_record({'a': {'vcpu': '0-99999'}}), 'beyond the 8192 CPUs'),
    (_record({'a': {'vcpu': ''}}), 'guest a: no vcpu CPUs'),
    ('{"version": 1, "guests": {"a": {"vcpu": NaN}}}',
     'NaN is not a JSON number'),
    ('[' * 100000 + ']' * 100000, 'nested too deep'),
    (b'\xff\xfe{', 'unreadable'),
])
def test_an_in_flight_record_that_cannot_be_used_is_discarded_naming_it(
        tmp_path, caplog, text, reason):
    record = state.InFlightRecord(str(tmp_path))
    path = tmp_path / 'in-flight-pins.json'
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with caplog.at_level(logging.WARNING, logger='ufo_agent.state'):
        assert record.load() == {}
    [warning] = caplog.records
    assert warning.levelno == logging.WARNING
    assert str(path) in warning.getMessage()
    assert reason in warning.getMessage()
    # Replaced by the next save, which loads again.
    record.save({'a': {'vcpu': frozenset({1})}})
    assert record.load() == {'a': {'vcpu': frozenset({1})}}
