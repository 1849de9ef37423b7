"""NotificationPublisher over oslo.messaging's in-memory fake driver."""

import oslo_messaging

from ufo_agent import hostsignal
from ufo_agent.hostsignal import payload as wire
from ufo_agent.publishers import notification


class Collector:
    def __init__(self):
        self.received = []

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        self.received.append((publisher_id, event_type, payload))


def sig(state, seq, idle=4):
    return hostsignal.HostSignal(
        state=state, idle_cores=idle, reclaimable_cores=idle,
        managed_cores=8, unmet_cores=0, sequence=seq, timestamp=float(seq),
        source='s')


def test_sends_on_change_and_keepalive(conf):
    transport = oslo_messaging.get_notification_transport(conf, url='fake:/')
    collector = Collector()
    listener = oslo_messaging.get_notification_listener(
        transport, [oslo_messaging.Target(topic='ufo_notifications')],
        [collector], executor='threading')
    now = [0.0]
    publisher = notification.NotificationPublisher(
        conf, 'compute1', 'node1', transport=transport, clock=lambda: now[0])
    assert publisher.publish(sig(hostsignal.UNDERLOADED, 1))
    assert not publisher.publish(sig(hostsignal.UNDERLOADED, 2))
    now[0] = 1.0
    assert publisher.publish(sig(hostsignal.OVERLOADED, 3))
    now[0] = 40.0
    assert publisher.publish(sig(hostsignal.OVERLOADED, 4))  # keep-alive
    listener.start()
    try:
        import time
        deadline = time.monotonic() + 10
        while len(collector.received) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        listener.stop()
        listener.wait()
        transport.cleanup()
    assert [p for p, _, _ in collector.received] == ['ufo-agent.compute1'] * 3
    assert {e for _, e, _ in collector.received} == {wire.EVENT_TYPE}
    decoded = [wire.HostSignalPayload.from_dict(p)
               for _, _, p in collector.received]
    assert [d.signal.sequence for d in decoded] == [1, 3, 4]
    assert decoded[0].nodename == 'node1'
