"""The versioned wire format of host signals."""

import json

import pytest

from ufo_agent import hostsignal
from ufo_agent.hostsignal import payload as wire


def make_payload():
    signal = hostsignal.HostSignal(
        state=hostsignal.SATURATED, idle_cores=2, reclaimable_cores=5,
        managed_cores=32, unmet_cores=0, sequence=42, timestamp=1700.5,
        source='agent-1')
    return wire.HostSignalPayload('compute1', 'compute1.example', signal)


def test_round_trip_through_json():
    original = make_payload()
    raw = json.loads(json.dumps(original.to_dict()))
    assert raw['ufo_object.version'] == wire.VERSION == '1.0'
    assert raw['ufo_object.name'] == 'HostSignalPayload'
    decoded = wire.HostSignalPayload.from_dict(raw)
    assert decoded == original


def test_newer_minor_version_is_tolerated():
    raw = make_payload().to_dict()
    raw['ufo_object.version'] = '1.7'
    raw['ufo_object.data']['future_field'] = {'x': 1}
    decoded = wire.HostSignalPayload.from_dict(raw)
    assert decoded.version == '1.7'
    assert decoded.signal.idle_cores == 2


@pytest.mark.parametrize('mutate, message', [
    (lambda r: r.update({'ufo_object.version': '2.0'}),
     'unsupported HostSignalPayload version 2.0'),
    (lambda r: r.update({'ufo_object.version': 'one'}), 'malformed'),
    (lambda r: r.pop('ufo_object.version'), 'malformed'),
    (lambda r: r.update({'ufo_object.name': 'Other'}),
     'not a HostSignalPayload'),
    (lambda r: r.update({'ufo_object.data': []}), 'no data dict'),
    (lambda r: r['ufo_object.data'].pop('idle_cores'),
     'lacks field.*idle_cores'),
    (lambda r: r['ufo_object.data'].update(state='melting'),
     'state must be one of'),
    (lambda r: r['ufo_object.data'].update(idle_cores='3'),
     'idle_cores must be an integer'),
    (lambda r: r['ufo_object.data'].update(sequence=-1),
     'sequence must be >= 0'),
    (lambda r: r['ufo_object.data'].update(host=''),
     'host must be a non-empty string'),
    (lambda r: r['ufo_object.data'].update(timestamp=None),
     'timestamp must be seconds'),
])
def test_malformed_payloads_are_rejected(mutate, message):
    raw = make_payload().to_dict()
    mutate(raw)
    with pytest.raises(wire.PayloadError, match=message):
        wire.HostSignalPayload.from_dict(raw)


@pytest.mark.parametrize('raw', [None, 'text', [], 3])
def test_non_dict_payloads_are_rejected(raw):
    with pytest.raises(wire.PayloadError):
        wire.HostSignalPayload.from_dict(raw)


def test_same_report_ignores_sequence_and_time():
    a = make_payload().signal
    b = hostsignal.HostSignal(**dict(a.__dict__, sequence=43,
                                     timestamp=1800.0))
    c = hostsignal.HostSignal(**dict(a.__dict__, idle_cores=3))
    assert a.same_report(b)
    assert not a.same_report(c)
    assert not a.same_report(None)
