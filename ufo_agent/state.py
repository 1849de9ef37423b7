"""Per-instance files of learned models: atomic, versioned, disposable.

One JSON file per instance uuid under ``[agent] state_path``. A write goes
to a temporary file that is flushed, fsynced and renamed over the old one,
so a crash leaves either the old or the new file. A file of another format
version, or one that is not strict JSON (``NaN`` and ``Infinity`` are
not), nests too deep or holds no learned object, is discarded with a
warning naming it, and the instance is learned again: learned state is an
optimisation, never a reason to refuse to start or to leave an instance
unmanaged. The next save replaces the file.
"""

import json
import logging
import os
import re
import tempfile

FORMAT_VERSION = 1
_UUID = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$')

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


def parse(text, uuid):
    """The learned object of a state file's text; InvalidState if none."""
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise InvalidState('nested too deep')
    except ValueError as exc:       # InvalidState, JSONDecodeError
        raise InvalidState(str(exc))
    if not isinstance(data, dict):
        raise InvalidState('%s, not an object' % _json_type(data))
    if data.get('version') != FORMAT_VERSION:
        raise InvalidState('format version %r, expected %d'
                           % (data.get('version'), FORMAT_VERSION))
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
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix='.tmp-')
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

    def uuids(self):
        names = os.listdir(self.directory)
        return sorted(name[:-5] for name in names
                      if name.endswith('.json') and not name.startswith('.'))

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
