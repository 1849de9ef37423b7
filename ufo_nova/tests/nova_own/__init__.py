"""Nova's own functional tests, unmodified, with UFO's plugins enabled.

``load_tests`` loads Nova 34's scheduler-related functional test modules
from the installed nova package and runs them inside a suite that gives
every test the nova.conf of ``nova-scheduler.conf`` (this folder; the
configuration doc/source/scheduler.rst documents): Nova's ConfFixture is
replaced, for these tests only, by one that also parses that file, as
nova-scheduler parses an operator's nova.conf. Test cases, ids and
assertions are Nova's; a test that sets its own filters or weighers with
``self.flags`` overrides the file, as an override does in Nova.

``test_ufo_enabled`` (this folder) runs in the same suite: it checks that
the configuration reaches Nova's scheduler and that the listener follows
the scheduler service.

Run with stestr (ufo_nova/tests/run-nova-tests.sh), not pytest: Nova's
TestCase cleanup breaks under pytest.
"""

import os
import unittest

import fixtures

#: The modules the issue names: 207 tests in nova 34.0.0, 117 run.
NOVA_MODULES = (
    'nova.tests.functional.test_scheduler',
    'nova.tests.functional.test_cold_migrate',
    'nova.tests.functional.test_server_group',
    'nova.tests.functional.test_aggregates',
)

#: Server group tests repeated at older API microversions: the same
#: scheduler requests, another request body (V21 the ``policies`` list).
#: The newest, ServerGroupTestV295, inherits every one of their tests and
#: runs; the older ones would add 90 tests and about five minutes of test
#: time for no scheduler path it misses (the API turns both bodies into
#: the same InstanceGroup before the scheduler sees it).
SKIPPED_CLASSES = frozenset((
    'nova.tests.functional.test_server_group.ServerGroupTestV21',
    'nova.tests.functional.test_server_group.ServerGroupTestV215',
    'nova.tests.functional.test_server_group.ServerGroupTestV264',
))

NOVA_CONF = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         'nova-scheduler.conf')


def _conf_fixture_class():
    # Imported here: importing this package (stestr discovery of
    # ufo_nova/tests) must not need Nova's test tree until it loads tests.
    from nova.tests import fixtures as nova_fixtures

    from ufo_nova.tests.functional import base

    class UFOConfFixture(nova_fixtures.ConfFixture):
        """Nova's test configuration plus nova-scheduler.conf."""

        def setUp(self):
            super().setUp()
            # Parsed again, now with the file, as Nova's parse_args does.
            self.conf([], project='nova', default_config_files=[NOVA_CONF])
            # The wheel installs api-paste.ini outside Nova's state path.
            self.conf.set_default('api_paste_config',
                                  base.api_paste_config(), group='wsgi')

    return UFOConfFixture


class WithUFOScheduler(unittest.TestSuite):
    """Runs its tests with nova-scheduler.conf in Nova's configuration."""

    def run(self, result, debug=False):
        patch = fixtures.MonkeyPatch('nova.tests.fixtures.ConfFixture',
                                     _conf_fixture_class())
        with patch:
            return super().run(result, debug)


def load_tests(loader, standard_tests, pattern):
    suite = WithUFOScheduler()
    for name in NOVA_MODULES + (__name__ + '.test_ufo_enabled',):
        suite.addTests(test for test in _tests(loader.loadTestsFromName(name))
                       if _class_path(test) not in SKIPPED_CLASSES)
    return suite


def _tests(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _tests(item)
        else:
            yield item


def _class_path(test):
    return '%s.%s' % (type(test).__module__, type(test).__qualname__)
