"""The versioned wire format of a host signal.

A payload is a JSON-friendly dict in the style of Nova's versioned
notifications::

    {"ufo_object.name": "HostSignalPayload",
     "ufo_object.namespace": "ufo",
     "ufo_object.version": "1.0",
     "ufo_object.data": {"host": ..., "nodename": ..., "state": ...,
                         "idle_cores": ..., "reclaimable_cores": ...,
                         "managed_cores": ..., "unmet_cores": ...,
                         "sequence": ..., "timestamp": ..., "source": ...}}

Compatibility rules: a new *minor* version only adds fields, so a receiver
accepts any minor version of its major version and ignores fields it does
not know; a new *major* version is rejected with :class:`PayloadError`.
"""

import dataclasses

from ufo_agent.hostsignal import model

NAME = 'HostSignalPayload'
NAMESPACE = 'ufo'
MAJOR = 1
MINOR = 0
VERSION = '%d.%d' % (MAJOR, MINOR)
#: The oslo.messaging event type of host signal notifications.
EVENT_TYPE = 'ufo.host.signal'

_KEY = 'ufo_object.'
_INT_FIELDS = ('idle_cores', 'reclaimable_cores', 'managed_cores',
               'unmet_cores', 'sequence')
_STR_FIELDS = ('host', 'nodename', 'state', 'source')


class PayloadError(ValueError):
    """A received payload is malformed or of an unsupported version."""


@dataclasses.dataclass(frozen=True)
class HostSignalPayload:
    """A :class:`~model.HostSignal` and the host it describes."""

    host: str
    nodename: str
    signal: model.HostSignal
    version: str = VERSION

    def to_dict(self):
        data = {'host': self.host, 'nodename': self.nodename}
        data.update(dataclasses.asdict(self.signal))
        return {_KEY + 'name': NAME,
                _KEY + 'namespace': NAMESPACE,
                _KEY + 'version': VERSION,
                _KEY + 'data': data}

    @classmethod
    def from_dict(cls, raw):
        """Validate a received payload; raise :class:`PayloadError`."""
        if not isinstance(raw, dict):
            raise PayloadError('payload is a %s, not a dict'
                               % type(raw).__name__)
        if raw.get(_KEY + 'name') != NAME:
            raise PayloadError('not a %s: name is %r'
                               % (NAME, raw.get(_KEY + 'name')))
        version = raw.get(_KEY + 'version')
        major, minor = _parse_version(version)
        if major != MAJOR:
            raise PayloadError('unsupported %s version %s (this code reads '
                               '%d.x)' % (NAME, version, MAJOR))
        data = raw.get(_KEY + 'data')
        if not isinstance(data, dict):
            raise PayloadError('%s has no data dict' % NAME)
        missing = [f for f in _INT_FIELDS + _STR_FIELDS + ('timestamp',)
                   if f not in data]
        if missing:
            raise PayloadError('%s %s lacks field(s) %s'
                               % (NAME, version, ', '.join(missing)))
        for field in _STR_FIELDS:
            if not isinstance(data[field], str) or not data[field]:
                raise PayloadError('field %s must be a non-empty string, '
                                   'got %r' % (field, data[field]))
        try:
            signal = model.HostSignal(
                state=data['state'],
                idle_cores=data['idle_cores'],
                reclaimable_cores=data['reclaimable_cores'],
                managed_cores=data['managed_cores'],
                unmet_cores=data['unmet_cores'],
                sequence=data['sequence'],
                timestamp=_timestamp(data['timestamp']),
                source=data['source'])
        except ValueError as exc:
            raise PayloadError('invalid %s: %s' % (NAME, exc))
        return cls(host=data['host'], nodename=data['nodename'],
                   signal=signal, version=version)


def _parse_version(version):
    try:
        major, minor = version.split('.')
        return int(major), int(minor)
    except (AttributeError, ValueError):
        raise PayloadError('malformed %s version %r' % (NAME, version))


def _timestamp(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PayloadError('field timestamp must be seconds since the epoch, '
                           'got %r' % (value,))
    return float(value)
