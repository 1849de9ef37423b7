import os
import time

from ufo_sim.experiments import parallel


def _work(task):
    kind, value = task
    if kind == 'sleep':
        time.sleep(value)
    elif kind == 'raise':
        raise ValueError(value)
    elif kind == 'exit':
        os._exit(3)
    return value * 2, os.getpid()


def test_results_in_task_order_from_separate_processes():
    seen = []
    out = parallel.run(_work, [('x', i) for i in range(5)], processes=2,
                       on_result=lambda i, s, v: seen.append(i))
    assert [s for s, _ in out] == [parallel.OK] * 5
    assert [v[0] for _, v in out] == [0, 2, 4, 6, 8]
    assert all(v[1] != os.getpid() for _, v in out)
    assert sorted(seen) == list(range(5))


def test_timeout_error_and_death_are_reported_not_fatal():
    started = time.monotonic()
    out = parallel.run(_work, [('sleep', 30), ('raise', 'bad'),
                               ('exit', 0), ('x', 1)],
                       processes=2, timeout=1.0)
    assert time.monotonic() - started < 10
    assert out[0][0] == parallel.TIMEOUT
    assert out[1] == (parallel.ERROR, 'ValueError: bad')
    assert out[2] == (parallel.ERROR, 'worker died')
    assert out[3][0] == parallel.OK
