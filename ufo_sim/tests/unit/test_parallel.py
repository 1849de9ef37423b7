"""The task runner: local Ray workers, time limits, this process."""

import json
import os
import time

import pytest

from ufo_sim.experiments import parallel

pytestmark = pytest.mark.ray


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
    out = parallel.run(_work, [('sleep', 300), ('raise', 'bad'),
                               ('exit', 0), ('x', 1)],
                       processes=2, timeout=1.0)
    # Well before the sleeper would end (300 s). Ray's own start and a
    # worker's replacement on a busy 2-core machine took 26 s in CI.
    assert time.monotonic() - started < 120
    assert out[0][0] == parallel.TIMEOUT
    assert out[1] == (parallel.ERROR, 'ValueError: bad')
    assert out[2] == (parallel.ERROR, 'worker died')
    assert out[3][0] == parallel.OK


def _burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return os.getpid()


def test_the_workers_cpu_time_is_counted():
    before = parallel.worker_cpu_seconds()
    out = parallel.run(_burn, [0.3, 0.3], processes=2)
    assert [s for s, _ in out] == [parallel.OK] * 2
    assert parallel.worker_cpu_seconds() - before >= 0.5


def test_no_processes_runs_in_this_process():
    seen = []
    out = parallel.run(_work, [('x', 1), ('raise', 'bad')], processes=0,
                       on_result=lambda i, s, v: seen.append(i))
    assert out == [(parallel.OK, (2, os.getpid())),
                   (parallel.ERROR, 'ValueError: bad')]
    assert seen == [0, 1]


def test_a_grid_gives_the_same_results_on_any_number_of_workers(
        tmp_path, capsys):
    from ufo_sim import cmd
    short = ['--no-plots', '--managers', 'dyniso,ufo,default', '--loads',
             '0.2', '--apps', 'memcached', '--converge', '3', '--judge',
             '2', '--warmup', '2', '--measure', '8', '--seeds', '2']
    results = []
    for processes in ('1', '2', '0'):
        out = str(tmp_path / processes)
        assert cmd.main(['grid', '--out', out, '--processes', processes] +
                        short) == 0
        with open(os.path.join(out, 'grid.json')) as f:
            results.append(json.load(f)['results'])
    capsys.readouterr()
    assert results[0] == results[1] == results[2]


def _cannot_load():
    raise ImportError('the task\'s code is not installed here')


class _Unloadable:
    """A task function that no worker can unpickle."""

    def __call__(self, task):
        return task

    def __reduce__(self):
        return _cannot_load, ()


def test_tasks_no_worker_can_load_are_errors():
    out = parallel.run(_Unloadable(), [1, 2, 3], processes=2, timeout=60)
    assert [s for s, _ in out] == [parallel.ERROR] * 3
    assert all('no worker could load the task' in v for _, v in out)


def test_a_local_ray_that_misses_its_start_is_started_again(monkeypatch):
    import ray
    ray.shutdown()
    real_init, calls = ray.init, []

    def init(*args, **kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            raise Exception('The current node timed out during startup.')
        return real_init(*args, **kwargs)

    monkeypatch.setattr(ray, 'init', init)
    assert parallel.start_ray(2).is_initialized()
    assert len(calls) == 2
    out = parallel.run(_work, [('x', 3)], processes=2)
    assert out[0][0] == parallel.OK and out[0][1][0] == 6
