#!/bin/bash
# Runs the ufo_nova tests that need Nova or RabbitMQ (tox -e nova-functional).
#
# Usage: ufo_nova/tests/run-nova-tests.sh JUNIT_XML
#
# 1. Nova-dependent unit tests and the functional tests inside a real
#    in-process Nova, in Nova's default concurrency mode (eventlet), and,
#    in the same run, Nova's own scheduler functional tests with UFO's
#    filter and weigher enabled (ufo_nova/tests/nova_own: test_scheduler,
#    test_cold_migrate, test_server_group, test_aggregates).
# 2. The scheduling functional tests again with native threads
#    (OS_NOVA_DISABLE_EVENTLET_PATCHING=1): the listener and the signal
#    cache must work under both.
# 3. The RabbitMQ test, from its own test path so that Nova is not imported
#    (native threads).
#
# stestr, not pytest: Nova's TestCase cleanup breaks under pytest. Every run
# goes into one JUnit report, written whatever the outcome.
set -u
junit=${1:?usage: $0 JUNIT_XML}
streams=$(mktemp -d)
trap 'rm -rf "$streams"' EXIT
rc=0

run() {
    local name=$1
    shift
    echo "=== $name"
    "$@" || rc=1
    stestr last --subunit > "$streams/$name.subunit" || rc=1
}

in_nova='^(ufo_nova\.tests\.(nova_unit|functional|nova_own)\.'
in_nova+='|nova\.tests\.functional\.)'
run nova-eventlet stestr --test-path=./ufo_nova/tests --top-dir=./ \
    run --concurrency 2 "$in_nova"
run tools-nova stestr --test-path=./ufo_tools/tests/nova_unit --top-dir=./ \
    run --concurrency 1
run nova-threading env OS_NOVA_DISABLE_EVENTLET_PATCHING=1 \
    stestr --test-path=./ufo_nova/tests --top-dir=./ \
    run --concurrency 2 '^ufo_nova\.tests\.functional\.test_scheduling'
run rabbitmq stestr --test-path=./ufo_nova/tests/messaging --top-dir=./ \
    run --concurrency 1

cat "$streams"/*.subunit | subunit2junitxml -o "$junit" > /dev/null || rc=1
exit $rc
