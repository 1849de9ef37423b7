"""The ``notification`` publisher: oslo.messaging notifications.

Each notification has event type ``ufo.host.signal``, priority INFO,
publisher id ``ufo-agent.<host>`` and a versioned
:class:`~ufo_agent.hostsignal.payload.HostSignalPayload` as payload.
"""

import time

from oslo_log import log as logging
import oslo_messaging

from ufo_agent.hostsignal import payload as wire
from ufo_agent import publishers
from ufo_agent.publishers import policy

LOG = logging.getLogger(__name__)


class NotificationPublisher(publishers.Publisher):

    def __init__(self, conf, host, nodename, transport=None,
                 clock=time.monotonic):
        super().__init__(conf, host, nodename)
        opts = conf.publishers
        self._owns_transport = transport is None
        self._transport = (transport if transport is not None else
                           oslo_messaging.get_notification_transport(conf))
        self._notifier = oslo_messaging.Notifier(
            self._transport, publisher_id='ufo-agent.%s' % host,
            driver=opts.notification_driver,
            topics=opts.notification_topics,
            retry=opts.notification_retry)
        self._policy = policy.SendPolicy(opts.keepalive_interval,
                                         opts.min_interval)
        self._clock = clock

    def publish(self, signal):
        now = self._clock()
        if not self._policy.should_send(signal, now):
            return False
        body = wire.HostSignalPayload(self.host, self.nodename,
                                      signal).to_dict()
        # The notifier logs and swallows delivery failures; the next change
        # or keep-alive sends again.
        self._notifier.info({}, wire.EVENT_TYPE, body)
        self._policy.sent(signal, now)
        LOG.debug('Sent host signal %d (%s)', signal.sequence, signal.state)
        return True

    def close(self):
        if self._owns_transport:
            self._transport.cleanup()
