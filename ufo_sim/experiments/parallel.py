"""Run experiment tasks in worker processes, each under a time limit.

Every task gets a forked process of its own, at most ``processes`` at
once. A task that overruns ``timeout`` seconds is killed and reported,
not waited for: a simulation stuck inside the C event loop cannot be
interrupted any other way, and one lost cell must not cost a whole grid.
"""

import multiprocessing
from multiprocessing import connection
import time

OK = 'ok'
ERROR = 'error'
TIMEOUT = 'timeout'


def _child(conn, func, task):
    try:
        conn.send((OK, func(task)))
    except Exception as exc:     # reported to the parent, not lost
        conn.send((ERROR, '%s: %s' % (type(exc).__name__, exc)))
    finally:
        conn.close()


def run(func, tasks, processes=2, timeout=600.0, on_result=None):
    """Return [(status, value)] in task order.

    ``status`` is :data:`OK` (``value`` is ``func(task)``), :data:`ERROR`
    (``value`` says what was raised) or :data:`TIMEOUT`.
    ``on_result(index, status, value)`` is called as each task ends.
    """
    ctx = multiprocessing.get_context('fork')
    results = [None] * len(tasks)
    queue = list(range(len(tasks)))
    running = {}                 # connection -> (index, process, start)

    def finish(conn, status, value):
        index, proc, _ = running.pop(conn)
        conn.close()
        proc.join()
        results[index] = (status, value)
        if on_result is not None:
            on_result(index, status, value)

    while queue or running:
        while queue and len(running) < max(1, processes):
            index = queue.pop(0)
            parent, child = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child,
                               args=(child, func, tasks[index]))
            proc.start()
            child.close()
            running[parent] = (index, proc, time.monotonic())
        for conn in connection.wait(list(running), timeout=0.2):
            try:
                status, value = conn.recv()
            except EOFError:
                status, value = ERROR, 'worker died'
            finish(conn, status, value)
        now = time.monotonic()
        for conn, (index, proc, start) in list(running.items()):
            if now - start > timeout:
                proc.kill()
                finish(conn, TIMEOUT, 'no result after %.0f s' % timeout)
    return results
