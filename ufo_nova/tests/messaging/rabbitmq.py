"""A private RabbitMQ broker on 127.0.0.1 for tests.

It runs Debian's rabbitmq-server (bindep.txt installs it) as a node of its
own: its own node name, AMQP and distribution ports, Erlang cookie (HOME),
database and logs, all in a temporary directory, so that it never meets a
RabbitMQ that runs on the machine. ``restart()`` stops and starts the same
node, for broker-restart tests.
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import fixtures

RABBITMQ_BIN = '/usr/lib/rabbitmq/bin'


def _free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class RabbitMQFixture(fixtures.Fixture):

    def __init__(self, start_timeout=120):
        super().__init__()
        self.start_timeout = start_timeout
        self.process = None

    def _setUp(self):
        server = os.path.join(RABBITMQ_BIN, 'rabbitmq-server')
        if not os.access(server, os.X_OK):
            raise RuntimeError('%s not found: install the rabbitmq-server '
                               'package (bindep -b test)' % server)
        self.dir = tempfile.mkdtemp(prefix='ufo-rabbitmq-')
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.port = _free_port()
        self.node = 'ufo%d@localhost' % self.port
        with open(os.path.join(self.dir, 'enabled_plugins'), 'w') as f:
            f.write('[].\n')
        with open(os.path.join(self.dir, 'rabbitmq.conf'), 'w') as f:
            f.write('listeners.tcp.default = 127.0.0.1:%d\n' % self.port)
        self.env = dict(
            os.environ,
            HOME=self.dir,
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS='127.0.0.1',
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(_free_port()),
            RABBITMQ_MNESIA_BASE=os.path.join(self.dir, 'mnesia'),
            RABBITMQ_LOG_BASE=os.path.join(self.dir, 'log'),
            RABBITMQ_CONFIG_FILE=os.path.join(self.dir, 'rabbitmq'),
            RABBITMQ_ENABLED_PLUGINS_FILE=os.path.join(self.dir,
                                                       'enabled_plugins'),
            RABBITMQ_PID_FILE=os.path.join(self.dir, 'rabbitmq.pid'),
            ERL_EPMD_ADDRESS='127.0.0.1')
        self.url = 'rabbit://guest:guest@127.0.0.1:%d/' % self.port
        self.addCleanup(self.stop)
        self.start()

    def start(self):
        self.log = open(os.path.join(self.dir, 'server.log'), 'ab')
        self.process = subprocess.Popen(
            [os.path.join(RABBITMQ_BIN, 'rabbitmq-server')], env=self.env,
            cwd=self.dir, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError('rabbitmq-server exited with %d; see %s'
                                   % (self.process.returncode,
                                      self.log.name))
            try:
                with socket.create_connection(('127.0.0.1', self.port), 1):
                    pass
            except OSError:
                time.sleep(0.2)
                continue
            self._ctl('await_startup', '--timeout', '60')
            return
        self.stop()
        raise RuntimeError('rabbitmq-server did not listen on port %d '
                           'within %d s' % (self.port, self.start_timeout))

    def stop(self):
        if self.process is None:
            return
        if self.process.poll() is None:
            try:
                self._ctl('stop')
                self.process.wait(60)
            except Exception:
                # The server runs in a session of its own that this fixture
                # started: end that process group only.
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self.process = None
        self.log.close()

    def restart(self):
        self.stop()
        self.start()

    def _ctl(self, *args):
        subprocess.run(
            [os.path.join(RABBITMQ_BIN, 'rabbitmqctl'), '-n', self.node]
            + list(args), env=self.env, check=True, timeout=120,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
