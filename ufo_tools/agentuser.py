"""The unprivileged user the functional tests run ufo-agent as.

The packaged systemd unit runs the agent as ``ufo-agent``, in the groups
libvirt and kvm, with no capabilities (etc/systemd/ufo-agent.service).
The tests run as root; :class:`AgentUser` gives them a system user set up
the same way and a command prefix that becomes it (``setpriv``: no
capabilities, none to gain). The interpreter and the checkout may live in
directories closed to other users (a root home, a tox directory): the
user gets search permission on those directories alone, through ACL
entries that :meth:`AgentUser.revoke` removes again.
"""

import grp
import os
import pwd
import subprocess
import sys

NAME = 'ufo-agent-test'
GROUPS = ('libvirt', 'kvm')


class AgentUser:

    def __init__(self, name=NAME, groups=GROUPS):
        self.name = name
        self.groups = tuple(groups)
        self._granted = []

    def ensure(self):
        """Create the user (or fix its groups); returns self."""
        try:
            pwd.getpwnam(self.name)
        except KeyError:
            subprocess.run(['useradd', '--system', '--user-group',
                            '--no-create-home', '--home-dir', '/nonexistent',
                            '--shell', '/usr/sbin/nologin', self.name],
                           check=True)
        subprocess.run(['usermod', '--groups', ','.join(self.groups),
                        self.name], check=True)
        return self

    @property
    def uid(self):
        return pwd.getpwnam(self.name).pw_uid

    @property
    def gid(self):
        return pwd.getpwnam(self.name).pw_gid

    def group_ids(self):
        return sorted(grp.getgrnam(g).gr_gid for g in self.groups)

    def command(self):
        """The prefix that runs a command as this user, as the unit does."""
        return ['setpriv', '--reuid', str(self.uid), '--regid',
                str(self.gid), '--groups',
                ','.join(str(g) for g in self.group_ids()),
                '--inh-caps=-all', '--bounding-set=-all', '--no-new-privs']

    def _closed(self, path):
        st = os.stat(path)
        return not st.st_mode & 0o001

    def grant_search(self, path):
        """Search permission on every closed directory above ``path``."""
        path = os.path.realpath(path)
        parent = os.path.dirname(path)
        while True:
            # Granted anew each time: another root pytest session chmods
            # /tmp/pytest-of-root to 0700, which masks an earlier grant.
            if parent in self._granted or self._closed(parent):
                subprocess.run(['setfacl', '-m', 'u:%s:x' % self.name,
                                parent], check=True)
                if parent not in self._granted:
                    self._granted.append(parent)
            if parent == '/':
                break
            parent = os.path.dirname(parent)

    def grant_python(self):
        """This interpreter and every directory it imports from."""
        self.grant_search(sys.executable)
        self.grant_search(os.path.join(sys.prefix, 'x'))
        for entry in sys.path:
            if entry and os.path.isdir(entry):
                self.grant_search(os.path.join(entry, 'x'))

    def workdir(self, path):
        """Make ``path`` (a directory) the user's to write in."""
        self.grant_search(path)
        os.chown(path, self.uid, self.gid)
        return path

    def own_directory(self, path):
        """``path`` created if missing, the user's alone (mode 0700).

        What the unit's RuntimeDirectory= does for the host-wide lock's
        directory at every start, also after an agent run as root.
        """
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.chown(path, self.uid, self.gid)
        os.chmod(path, 0o700)
        return path

    def revoke(self):
        while self._granted:
            subprocess.run(['setfacl', '-x', 'u:%s' % self.name,
                            self._granted.pop()], check=False)
