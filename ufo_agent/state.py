"""The agent's files under ``[agent] state_path``: atomic and versioned.

* One JSON file of learned models per instance uuid (:class:`StateStore`),
  disposable: a file that cannot be used is discarded with a warning
  naming it, and the instance is learned again. Learned state is an
  optimisation, never a reason to refuse to start or to leave an instance
  unmanaged. The next save replaces the file.
* The in-flight pin record, ``in-flight-pins.json``
  (:class:`InFlightRecord`): the CPUs that pin calls not known to have
  returned may still put each guest's threads on (see
  :mod:`ufo_agent.service.inflight`).

A write goes to a temporary file that is flushed, fsynced and renamed
over the old one, so a crash leaves either the old or the new file. A
file of another format version, or one that is not strict JSON (``NaN``
and ``Infinity`` are not), nests too deep or holds something else than
its format says, is discarded with a warning naming it.
"""

import json
import logging
import os
import re
import tempfile

from ufo_agent import cpuset

FORMAT_VERSION = 1
_UUID = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$')
IN_FLIGHT_NAME = 'in-flight-pins.json'
IN_FLIGHT_VERSION = 1
# The pinnings of a guest that the record keeps apart (the enforcer's).
IN_FLIGHT_KINDS = ('vcpu', 'emulator')

LOG = logging.getLogger(__name__)


class InvalidState(ValueError):
    """A state file that must not be used."""


_JSON_TYPES = {dict: 'an object', list: 'an array', str: 'a string',
               int: 'a number', float: 'a number', bool: 'a boolean',
               type(None): 'null'}


def _json_type(value):
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _reject_constant(name):
    raise InvalidState('%s is not a JSON number' % name)


def _load_json(text, version):
    """The object of a file's strict JSON ``text`` of format ``version``."""
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise InvalidState('nested too deep')
    except ValueError as exc:       # InvalidState, JSONDecodeError
        raise InvalidState(str(exc))
    if not isinstance(data, dict):
        raise InvalidState('%s, not an object' % _json_type(data))
    if data.get('version') != version:
        raise InvalidState('format version %r, expected %d'
                           % (data.get('version'), version))
    return data


def write_atomically(directory, path, payload):
    """Replace ``path`` (in ``directory``) by ``payload``, all or nothing."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.tmp-')
    try:
        with os.fdopen(fd, 'w') as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def parse(text, uuid):
    """The learned object of a state file's text; InvalidState if none."""
    data = _load_json(text, FORMAT_VERSION)
    if data.get('uuid') != uuid:
        raise InvalidState('saved for instance %r' % (data.get('uuid'),))
    learned = data.get('learned')
    if not isinstance(learned, dict):
        raise InvalidState('its learned state is %s, not an object'
                           % _json_type(learned))
    return learned


class StateStore:
    """Learned state of each instance, keyed by uuid."""

    def __init__(self, directory):
        self.directory = directory
        os.makedirs(directory, mode=0o700, exist_ok=True)

    def _path(self, uuid):
        if not _UUID.match(uuid):
            raise ValueError('invalid instance uuid %r' % uuid)
        return os.path.join(self.directory, '%s.json' % uuid)

    def save(self, uuid, learned):
        path = self._path(uuid)
        # Strict JSON, as load reads it (ValueError for NaN, Infinity).
        payload = json.dumps({'version': FORMAT_VERSION, 'uuid': uuid,
                              'learned': learned}, sort_keys=True,
                             allow_nan=False)
        write_atomically(self.directory, path, payload)

    def load(self, uuid):
        """The learned object saved for ``uuid``, or None.

        None also for a file that cannot be read or used, after a
        warning naming it (:meth:`discard`).
        """
        path = self._path(uuid)
        try:
            with open(path, encoding='utf-8') as handle:
                text = handle.read()
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:    # ValueError: not UTF-8
            self.discard(uuid, 'unreadable: %s' % exc)
            return None
        try:
            return parse(text, uuid)
        except InvalidState as exc:
            self.discard(uuid, str(exc))
            return None

    def discard(self, uuid, reason):
        """Say that ``uuid``'s state file is not used, and why.

        The file stays until the next save replaces it, for diagnosis.
        """
        LOG.warning('Discarding the learned state file %s: %s; the instance '
                    'is learned again', self._path(uuid), reason)

    def delete(self, uuid):
        try:
            os.unlink(self._path(uuid))
        except FileNotFoundError:
            pass

    def in_flight_record(self):
        """The :class:`InFlightRecord` of this directory."""
        return InFlightRecord(self.directory)

    def uuids(self):
        names = os.listdir(self.directory)
        return sorted(name[:-5] for name in names
                      if name.endswith('.json') and not name.startswith('.')
                      and name != IN_FLIGHT_NAME)

    def prune(self, keep):
        """Delete the state of every instance not in ``keep``."""
        keep = set(keep)
        gone = [uuid for uuid in self.uuids() if uuid not in keep]
        for uuid in gone:
            self.delete(uuid)
        for name in os.listdir(self.directory):
            if name.startswith('.tmp-'):
                os.unlink(os.path.join(self.directory, name))
        return gone


def parse_in_flight(text):
    """{uuid: {kind: CPUs}} of an in-flight record; InvalidState if none.

    Strict: every guest is a uuid, every kind one of
    :data:`IN_FLIGHT_KINDS`, every set a non-empty cpuset list.
    """
    data = _load_json(text, IN_FLIGHT_VERSION)
    extra = set(data) - {'version', 'guests'}
    if extra:
        raise InvalidState('unknown field(s) %s' % ', '.join(sorted(extra)))
    guests = data.get('guests')
    if not isinstance(guests, dict):
        raise InvalidState('its guests are %s, not an object'
                           % _json_type(guests))
    out = {}
    for uuid, kinds in guests.items():
        if not _UUID.match(uuid):
            raise InvalidState('invalid instance uuid %r' % uuid[:80])
        if not isinstance(kinds, dict) or not kinds:
            raise InvalidState('guest %s: %s, not an object of pinnings'
                               % (uuid, _json_type(kinds)))
        out[uuid] = {}
        for kind, text in kinds.items():
            if kind not in IN_FLIGHT_KINDS:
                raise InvalidState('guest %s: unknown pinning %r'
                                   % (uuid, kind[:80]))
            if not isinstance(text, str):
                raise InvalidState('guest %s: %s CPUs are %s, not a cpuset '
                                   'list' % (uuid, kind, _json_type(text)))
            try:
                cpus = cpuset.parse_cpuset(text)
            except cpuset.CpusetError as exc:
                raise InvalidState('guest %s: %s' % (uuid, exc))
            if not cpus:
                raise InvalidState('guest %s: no %s CPUs' % (uuid, kind))
            out[uuid][kind] = cpus
    return out


class InFlightRecord:
    """``in-flight-pins.json`` under ``directory``: {uuid: {kind: CPUs}}.

    No file is an empty record: it is removed when nothing is in flight.
    """

    def __init__(self, directory):
        self.directory = directory
        self.path = os.path.join(directory, IN_FLIGHT_NAME)

    def load(self):
        """The record, ``{}`` without one.

        ``{}`` also for a file that cannot be read or used, after a
        warning naming it; the next save replaces it.
        """
        try:
            with open(self.path, encoding='utf-8') as handle:
                text = handle.read()
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:    # ValueError: not UTF-8
            self._discard('unreadable: %s' % exc)
            return {}
        try:
            return parse_in_flight(text)
        except InvalidState as exc:
            self._discard(str(exc))
            return {}

    def _discard(self, reason):
        LOG.warning('Discarding the in-flight pin record %s: %s; pin calls '
                    'an earlier agent left outstanding are not known',
                    self.path, reason)

    def save(self, entries):
        """Replace the record by ``entries`` ({uuid: {kind: CPUs}}).

        Raises OSError when it cannot be written.
        """
        guests = {uuid: {kind: cpuset.format_cpuset(cpus)
                         for kind, cpus in sorted(kinds.items()) if cpus}
                  for uuid, kinds in entries.items()}
        guests = {uuid: kinds for uuid, kinds in guests.items() if kinds}
        if not guests:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            return
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        write_atomically(self.directory, self.path, json.dumps(
            {'version': IN_FLIGHT_VERSION, 'guests': guests},
            sort_keys=True))
