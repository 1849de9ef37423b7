"""The metrics endpoint, the status JSON and ufo-status, over real HTTP."""

import urllib.request

from ufo_agent.cmd import status
from ufo_agent.service import metrics
from ufo_agent.tests.unit.service import fakes
from ufo_agent.tests.unit.service import test_loop


def test_endpoint_serves_metrics_and_status_on_loopback(capsys):
    driver = fakes.FakeDriver()
    driver.add(fakes.FakeGuest('a', 8))
    driver.add(fakes.FakeGuest('b"x', 4, channel=False))
    agent, tick = test_loop._agent(driver)
    from ufo_agent import hostsignal
    agent.signal_tracker = hostsignal.HostSignalTracker()
    agent.start()
    for _ in range(4):
        tick()
    server = metrics.MetricsServer('127.0.0.1', 0)
    server.snapshot = agent.snapshot
    server.start()
    try:
        base = 'http://127.0.0.1:%d' % server.address[1]
        text = urllib.request.urlopen(base + '/metrics').read().decode()
        assert '# TYPE ufo_idle_pool_cores gauge' in text
        assert 'ufo_overloaded 0' in text
        assert 'ufo_host_state{state="saturated"} 1' in text
        assert 'ufo_host_signal_sequence 4.0' in text
        assert 'ufo_vm_cores{uuid="a",name="name-a"} ' in text
        assert 'uuid="b\\"x"' in text          # label escaping
        assert 'ufo_vm_mode{uuid="a",mode="active",signal="guest"} 1' \
            in text
        assert status.main(['--url', base + '/status']) == 0
        table = capsys.readouterr().out
        assert 'pools: managed 8' in table
        assert 'name-a' in table and 'host-only' in table
        try:
            urllib.request.urlopen(base + '/nope')
        except urllib.error.HTTPError as exc:
            assert exc.code == 404
    finally:
        server.stop()
    assert status.main(['--url', base + '/status']) == 1
    assert 'cannot reach ufo-agent' in capsys.readouterr().err
