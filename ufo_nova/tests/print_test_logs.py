"""Print the captured logs of tests from a subunit v2 stream.

stestr and subunit2pyunit show captured logs only for failing tests. To
read what the scheduler logged in a passing functional test::

    OS_DEBUG=True .tox/nova-functional/bin/python -m subunit.run \\
        ufo_nova.tests.functional.test_scheduling > /tmp/run.subunit
    .tox/nova-functional/bin/python ufo_nova/tests/print_test_logs.py \\
        < /tmp/run.subunit | grep -E 'UFOFilter|ufo_nova'
"""

import sys

import subunit
import testtools


def main():
    def on_test(test):
        print('=== %s: %s' % (test['id'], test['status']))
        for name, detail in test['details'].items():
            if 'logging' in name:
                sys.stdout.write(''.join(detail.iter_text()))

    stream = subunit.ByteStreamToStreamResult(sys.stdin.buffer,
                                              non_subunit_name='stdout')
    result = testtools.StreamToDict(on_test)
    result.startTestRun()
    stream.run(result)
    result.stopTestRun()


if __name__ == '__main__':
    main()
