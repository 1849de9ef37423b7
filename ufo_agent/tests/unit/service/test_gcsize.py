"""The collector's young generation follows the number of guests."""

import gc

import pytest

from ufo_agent.service import gcsize
from ufo_agent.tests.unit.service import fakes


@pytest.fixture
def thresholds():
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_young_generation_grows_and_shrinks_with_the_guests(thresholds):
    default, *older = gc.get_threshold()
    driver = fakes.FakeDriver(cores=32)
    for i in range(100):
        driver.add(fakes.FakeGuest('g%03d' % i, 2))
    agent, tick = fakes.ticking_agent(driver)
    agent.start()
    assert gc.get_threshold() == (gcsize.OBJECTS_PER_GUEST * 100, *older)
    tick()
    for i in range(95):
        del driver.all['g%03d' % i]
    tick()
    assert len(agent.guests) == 5
    # A few guests: the interpreter's own threshold.
    assert gc.get_threshold() == (default, *older)


def test_a_tick_of_many_guests_sets_off_no_young_collection(thresholds):
    driver = fakes.FakeDriver(cores=32)
    for i in range(300):
        driver.add(fakes.FakeGuest('g%03d' % i, 2))
    agent, tick = fakes.ticking_agent(driver)
    agent.start()
    for _ in range(3):
        tick()
    collections = []

    def count(phase, info):
        if phase == 'start':
            collections.append(info['generation'])

    gc.collect()
    gc.callbacks.append(count)
    try:
        tick()
    finally:
        gc.callbacks.remove(count)
    assert collections == []
