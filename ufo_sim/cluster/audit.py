"""The overload-relief Watcher audit of the simulated cloud.

The cloud's migration policy is decided by ufo-nova's real Watcher
strategy (:class:`ufo_nova.watcher.strategy.UFOOverloadRelief`) over a
compute model built with Watcher's own model classes, its signals from a
:class:`~ufo_nova.watcher.signals.DirectSignalSource`. Watcher and Nova
register the same oslo.config option differently and cannot share an
interpreter (in a cloud they are separate services), so the audit runs
in a child interpreter of its own (:class:`Auditor`), as
watcher-decision-engine runs beside nova-scheduler.
"""

import dataclasses
import datetime
import logging
import pickle
import struct
import subprocess
import sys
import traceback

from ufo_agent import extraspecs

PROJECT = '6d1c3a55-0f8e-4f7e-9b5a-3c2e1d0f9a11'    # the cloud's tenant


@dataclasses.dataclass(frozen=True)
class Node:
    """A compute node as Watcher's model holds it."""

    host: str
    vcpus: int
    vcpu_ratio: float
    memory_mb: int


@dataclasses.dataclass(frozen=True)
class Guest:
    """An active instance as Watcher's model holds it."""

    uuid: str
    host: str
    vcpus: int
    memory_mb: int
    lc: bool


@dataclasses.dataclass(frozen=True)
class Request:
    """Everything one audit reads; all of it picklable."""

    now: float
    nodes: tuple            # (Node, ...)
    guests: tuple           # (Guest, ...)
    histories: dict         # {host: [HostSignal, ...]}, oldest first
    instance_cores: dict    # {uuid: cores}
    last_migrated: dict     # {uuid: time}
    params: dict            # the strategy's input parameters


def audit(request):
    """``[(uuid, source, destination), ...]``: the live migrations decided.

    Runs the strategy as Watcher's decision engine does
    (``execute()``: pre-, do- and post-execute) and reads the migrate
    actions of its solution. Imports Watcher: call it in an interpreter
    without Nova (:class:`Auditor`).
    """
    from watcher.common import utils as watcher_utils
    from watcher.decision_engine.model import element
    from watcher.decision_engine.model import model_root

    from ufo_nova.watcher import signals
    from ufo_nova.watcher import strategy as strategy_mod

    model = model_root.ModelRoot()
    nodes = {}
    for i, node in enumerate(request.nodes):
        element_node = element.ComputeNode(
            id=i, uuid='node-%s' % node.host, hostname=node.host,
            memory=node.memory_mb, memory_mb_reserved=0, memory_ratio=1.0,
            disk=10000, disk_gb_reserved=0, disk_ratio=1.0,
            vcpus=node.vcpus, vcpu_reserved=0, vcpu_ratio=node.vcpu_ratio)
        model.add_node(element_node)
        nodes[node.host] = element_node
    created = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    for guest in request.guests:
        instance = element.Instance(
            uuid=guest.uuid, name=guest.uuid, memory=guest.memory_mb,
            disk=1, vcpus=guest.vcpus, metadata={}, project_id=PROJECT,
            created=created, host=guest.host,
            hypervisor_hostname=guest.host,
            state=element.InstanceState.ACTIVE.value,
            flavor_extra_specs={extraspecs.CLASS: 'lc' if guest.lc else 'be'})
        model.add_instance(instance)
        model.map_instance(instance, nodes[guest.host])

    source = signals.DirectSignalSource(keep_s=float('inf'))
    for host, history in sorted(request.histories.items()):
        for signal in history:
            source.record(host, signal)
    for uuid, cores in request.instance_cores.items():
        source.set_instance_cores(uuid, cores)

    strategy = strategy_mod.UFOOverloadRelief(
        config=watcher_utils.Struct(datasources=None))
    strategy._compute_model = model
    strategy.input_parameters = watcher_utils.Struct(dict(request.params))
    strategy.signal_source = source
    strategy.migration_log = _Log(request.last_migrated)
    strategy.clock = lambda: request.now
    solution = strategy.execute()
    return [(a['input_parameters']['resource_id'],
             a['input_parameters']['source_node'],
             a['input_parameters']['destination_node'])
            for a in solution.actions if a['action_type'] == 'migrate']


class _Log:
    """When each instance last moved: the simulator's books."""

    def __init__(self, last):
        self.last = dict(last)

    def last_migrated(self, now):
        return dict(self.last)


class Auditor:
    """Runs :func:`audit` in a child interpreter started once.

    The child is ``python -m ufo_sim.cluster.audit``: it imports Watcher
    and nothing of this process (not its ``__main__``, as
    multiprocessing would). Requests and answers go as pickles over its
    standard input and output. A context manager; :meth:`audit` blocks
    for the decision.
    """

    def __init__(self):
        self._child = None

    def __enter__(self):
        self._child = subprocess.Popen(
            [sys.executable, '-m', 'ufo_sim.cluster.audit'],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        return self

    def __exit__(self, *exc):
        child, self._child = self._child, None
        child.stdin.close()
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        child.stdout.close()

    def audit(self, request):
        _send(self._child.stdin, request)
        status, value = _receive(self._child.stdout)
        if status != 'ok':
            raise RuntimeError('the Watcher audit failed: %s' % value)
        return value


def _send(stream, obj):
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack('>Q', len(data)) + data)
    stream.flush()


def _receive(stream):
    head = stream.read(8)
    if len(head) < 8:
        raise EOFError('the Watcher audit process ended')
    (size,) = struct.unpack('>Q', head)
    return pickle.loads(stream.read(size))


def _serve(stdin, stdout):
    """The child's loop: a request in, ``(status, moves)`` out."""
    while True:
        try:
            request = _receive(stdin)
        except EOFError:
            return
        try:
            answer = ('ok', audit(request))
        except Exception:
            answer = ('error', traceback.format_exc())
        _send(stdout, answer)


if __name__ == '__main__':
    # Watcher's logging goes to stderr, its errors only (the held hosts
    # are in each decision); stdout carries the answers only.
    logging.basicConfig(level=logging.ERROR)
    out = sys.stdout.buffer
    sys.stdout = sys.stderr
    _serve(sys.stdin.buffer, out)
