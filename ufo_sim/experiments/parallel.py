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
            ray.init(num_cpus=max(1, processes), **options)
        else:
            ray.init(address=_address, **options)
    return ray


def _width(ray, processes):
    if _address is None:
        return max(1, processes)
    return max(1, int(ray.cluster_resources().get('CPU', 1)))


class _Worker:
    """One Ray worker process, which runs one task at a time."""

    def ready(self):
        return True

    def run(self, func, task):
        """(status, value, CPU seconds the task took)."""
        cpu = time.process_time()
        status, value = _call(func, task)
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
    global _worker_cpu
    if not tasks:
        return []
    if processes <= 0 or _here:
        return _run_here(func, tasks, on_result)
    ray = _ray(processes)
    from ray import exceptions
    worker_class = ray.remote(num_cpus=1, max_restarts=0,
                              max_task_retries=0)(_Worker)
    results = [None] * len(tasks)
    queue = list(range(len(tasks)))
    starting = {}               # ready() ObjectRef -> worker
    idle = []                   # workers ready for a task
    running = {}                # run() ObjectRef -> (index, worker, start)

    def start_worker():
        worker = worker_class.remote()
        starting[worker.ready.remote()] = worker

    def finish(ref, status, value):
        index, _, _ = running.pop(ref)
        results[index] = (status, value)
        if on_result is not None:
            on_result(index, status, value)

    for _ in range(min(_width(ray, processes), len(tasks))):
        start_worker()
    try:
        while queue or running:
            while queue and idle:
                index = queue.pop(0)
                worker = idle.pop()
                running[worker.run.remote(func, tasks[index])] = (
                    index, worker, time.monotonic())
            ready, _ = ray.wait(list(running) + list(starting),
                                num_returns=1, timeout=0.2)
            for ref in ready:
                if ref in starting:
                    worker = starting.pop(ref)
                    try:
                        ray.get(ref)
                        idle.append(worker)
                    except exceptions.RayError:
                        start_worker()
                    continue
                worker = running[ref][1]
                try:
                    status, value, cpu = ray.get(ref)
                    _worker_cpu += cpu
                    idle.append(worker)
                except exceptions.RayError:
                    status, value = ERROR, 'worker died'
                    start_worker()
                finish(ref, status, value)
            now = time.monotonic()
            for ref, (index, worker, start) in list(running.items()):
                if now - start > timeout:
                    ray.kill(worker)
                    finish(ref, TIMEOUT, 'no result after %.0f s' % timeout)
                    start_worker()
    finally:
        for worker in idle + list(starting.values()) + [
                w for _, w, _ in running.values()]:
            ray.kill(worker)
    return results


def _run_here(func, tasks, on_result):
    results = []
    for index, task in enumerate(tasks):
        results.append(_call(func, task))
        if on_result is not None:
            on_result(index, *results[-1])
    return results
