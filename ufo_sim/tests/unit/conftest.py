"""The simulator's unit tests run their tasks in the test's process.

They test what the tasks compute; the runner itself, on Ray, is tested
by the tests marked ``ray`` (test_parallel.py, run in the py3 env).
"""

import pytest

from ufo_sim.experiments import parallel


def pytest_configure(config):
    config.addinivalue_line('markers', 'ray: runs its tasks on a local Ray')


@pytest.fixture(autouse=True)
def _tasks_in_this_process(request):
    here = request.node.get_closest_marker('ray') is None
    parallel.use_this_process(here)
    yield
    parallel.use_this_process(False)
