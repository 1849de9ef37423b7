"""Per-instance files of learned models: atomic, versioned, disposable.

One JSON file per instance uuid under ``[agent] state_path``. A write goes
to a temporary file that is flushed, fsynced and renamed over the old one,
so a crash leaves either the old or the new file. A file of another format
version, or one that does not parse, is ignored (and reported): learned
state is an optimisation, never a reason to refuse to start.
"""

import json
import logging
import os
import re
import tempfile

FORMAT_VERSION = 1
_UUID = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$')

LOG = logging.getLogger(__name__)


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
        payload = json.dumps({'version': FORMAT_VERSION, 'uuid': uuid,
                              'learned': learned}, sort_keys=True)
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
        """The learned data saved for ``uuid``, or None."""
        path = self._path(uuid)
        try:
            with open(path) as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            LOG.warning('Ignoring unreadable state file %s: %s', path, exc)
            return None
        if not isinstance(data, dict) or \
                data.get('version') != FORMAT_VERSION or \
                data.get('uuid') != uuid:
            LOG.warning('Ignoring state file %s: format version %r, '
                        'expected %d', path,
                        data.get('version') if isinstance(data, dict)
                        else None, FORMAT_VERSION)
            return None
        return data.get('learned')

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
