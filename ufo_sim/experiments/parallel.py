"""Run experiment tasks on Ray, each under a time limit.

By default on a Ray of this machine started for the process, with
``processes`` CPUs; after :func:`use_cluster` (``--ray-address``) on an
existing Ray cluster, whose nodes must have ufo-nova installed with the
``sim`` extra. Each task runs on a worker started beforehand, at most
one task per CPU, so that its time limit counts from its start. A task
that overruns ``timeout`` seconds has its worker killed, not waited
for: a simulation stuck inside the C event loop cannot be interrupted
any other way, and one lost cell must not cost a whole grid. Every task
is a pure function of its arguments: the results do not depend on how
many workers ran them. ``processes = 0`` runs the tasks one after the
other in this process, without a time limit (tests, a debugger).
"""

import logging
import time

OK = 'ok'
ERROR = 'error'
TIMEOUT = 'timeout'

# Workers that die before their first task, in a row, before the tasks
# left are reported as errors instead of waiting for another.
_MAX_FAILED_STARTS = 3

# Local Ray starts tried before giving up.
_LOCAL_STARTS = 3

LOG = logging.getLogger(__name__)

_address = None
_here = False              # every run in this process (use_this_process)
_worker_cpu = 0.0          # CPU seconds of the tasks that ended, in workers


def use_cluster(address):
    """Run later tasks on the Ray cluster at ``address`` (None: locally)."""
    global _address
    _address = address


def use_this_process(here=True):
    """Run later tasks in this process, as ``processes = 0`` does.

    For the simulator's unit tests, which test what the tasks compute:
    one Ray per test process would cost seconds and memory each.
    """
    global _here
    _here = here


def _ray(processes):
    """Ray, started (locally, or joined) for this process."""
    import ray
    if not ray.is_initialized():
        options = dict(include_dashboard=False, log_to_driver=False,
                       logging_level=logging.WARNING,
                       configure_logging=False)
        if _address is None:
            _start_local(ray, processes, options)
        else:
            ray.init(address=_address, **options)
    return ray


def _start_local(ray, processes, options):
    # Ray gives its raylet a fixed 30 s to register; on a machine whose
    # CPUs are busy (or at idle priority) that start can miss it once.
    for attempt in range(1, _LOCAL_STARTS + 1):
        try:
            ray.init(num_cpus=max(1, processes), **options)
            return
        except Exception as exc:
            ray.shutdown()
            if attempt == _LOCAL_STARTS:
                raise
            LOG.warning('Local Ray did not start (%s); trying again, '
                        '%d of %d', exc, attempt + 1, _LOCAL_STARTS)


def start_ray(processes):
    """Ray for this process's own actors (the cloud's host shards).

    Local with ``processes`` CPUs, or the cluster :func:`use_cluster`
    named; started once per process.
    """
    return _ray(processes)


def _width(ray, processes):
    if _address is None:
        return max(1, processes)
    return max(1, int(ray.cluster_resources().get('CPU', 1)))


class _Worker:
    """One Ray worker process, which runs one task at a time."""

    def prepare(self, func):
        """Load ``func`` (and so import its module) before any task."""
        self.func = func
        return True

    def run(self, task):
        """(status, value, CPU seconds the task took)."""
        cpu = time.process_time()
        status, value = _call(self.func, task)
        return status, value, time.process_time() - cpu


def _call(func, task):
    try:
        return OK, func(task)
    except Exception as exc:     # reported to the caller, not lost
        return ERROR, '%s: %s' % (type(exc).__name__, exc)


def worker_cpu_seconds():
    """CPU seconds that the tasks this process ran took in Ray workers."""
    return _worker_cpu


def run(func, tasks, processes=2, timeout=600.0, on_result=None):
    """Return [(status, value)] in task order.

    ``status`` is :data:`OK` (``value`` is ``func(task)``), :data:`ERROR`
    (``value`` says what was raised, or that the worker died) or
    :data:`TIMEOUT`. ``on_result(index, status, value)`` is called as each
    task ends. ``processes`` is the local Ray's size (the first run of a
    process starts it).

    Each task runs on a worker started beforehand, so that its time limit
    counts from its start, not from a worker's; a worker that overran or
    died is replaced.
    """
    if not tasks:
        return []
    if processes <= 0 or _here:
        return _run_here(func, tasks, on_result)
    return _RayRun(func, tasks, processes, timeout, on_result).run()


class _RayRun:
    """One :func:`run` on Ray: its workers, queue and results."""

    def __init__(self, func, tasks, processes, timeout, on_result):
        self.ray = _ray(processes)
        from ray import exceptions
        self.errors = exceptions.RayError
        self.worker_class = self.ray.remote(
            num_cpus=1, max_restarts=0, max_task_retries=0)(_Worker)
        self.func, self.tasks = func, tasks
        self.width = min(_width(self.ray, processes), len(tasks))
        self.timeout, self.on_result = timeout, on_result
        self.results = [None] * len(tasks)
        self.queue = list(range(len(tasks)))
        self.starting = {}      # prepare() ObjectRef -> worker
        self.idle = []          # workers ready for a task
        self.running = {}       # run() ObjectRef -> (index, worker, start)
        self.failed_starts = 0  # in a row

    def run(self):
        for _ in range(self.width):
            self._start_worker()
        try:
            while self.queue or self.running:
                self._give_tasks()
                ready, _ = self.ray.wait(
                    list(self.running) + list(self.starting),
                    num_returns=1, timeout=0.2)
                for ref in ready:
                    if ref in self.starting:
                        self._started(ref)
                    else:
                        self._ended(ref)
                self._stop_overruns()
        finally:
            for worker in self.idle + list(self.starting.values()) + [
                    w for _, w, _ in self.running.values()]:
                self.ray.kill(worker)
        return self.results

    def _start_worker(self):
        # Ready once it has imported the task's code: a task's time limit
        # is for the task, not for a worker's start.
        worker = self.worker_class.remote()
        self.starting[worker.prepare.remote(self.func)] = worker

    def _give_tasks(self):
        while self.queue and self.idle:
            index = self.queue.pop(0)
            worker = self.idle.pop()
            self.running[worker.run.remote(self.tasks[index])] = (
                index, worker, time.monotonic())

    def _report(self, index, status, value):
        self.results[index] = (status, value)
        if self.on_result is not None:
            self.on_result(index, status, value)

    def _started(self, ref):
        worker = self.starting.pop(ref)
        try:
            self.ray.get(ref)
        except self.errors as exc:
            self.failed_starts += 1
            if self.failed_starts < _MAX_FAILED_STARTS:
                self._start_worker()
            elif not (self.starting or self.idle or self.running):
                # Nothing can run the tasks left: say so for each.
                why = 'no worker could load the task: %s' % (
                    str(exc).splitlines()[0],)
                while self.queue:
                    self._report(self.queue.pop(0), ERROR, why)
            return
        self.failed_starts = 0
        self.idle.append(worker)

    def _ended(self, ref):
        global _worker_cpu
        index, worker, _ = self.running.pop(ref)
        try:
            status, value, cpu = self.ray.get(ref)
        except self.errors:
            status, value = ERROR, 'worker died'
            self._start_worker()
        else:
            _worker_cpu += cpu
            self.idle.append(worker)
        self._report(index, status, value)

    def _stop_overruns(self):
        now = time.monotonic()
        for ref, (index, worker, start) in list(self.running.items()):
            if now - start > self.timeout:
                del self.running[ref]
                self.ray.kill(worker)
                self._report(index, TIMEOUT,
                             'no result after %.0f s' % self.timeout)
                self._start_worker()


def _run_here(func, tasks, on_result):
    results = []
    for index, task in enumerate(tasks):
        results.append(_call(func, task))
        if on_result is not None:
            on_result(index, *results[-1])
    return results
