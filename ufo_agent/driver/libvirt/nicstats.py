"""The guests' NIC counters, from one libvirt bulk stats call per poll.

A stats call per guest and tick cost the agent more than the rest of the
guest's observation (each call is handed to a thread for its deadline),
so one ``virDomainListGetStats`` call over every managed guest serves
them all, and each guest takes its own record from it once: a guest
observed again in the same poll is read again.

The call asks with ``VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT`` for what
libvirt can tell without waiting for a domain's job (interface counters
need none): a domain whose QEMU monitor hangs costs nobody's counters.
Guests whose earlier calls have not returned are left out all the same,
and the call has a deadline key of its own: if it hangs, the counters
of every guest are unknown until it returns, and nothing else waits.
Counters are optional: without them a guest is observed as usual.
"""

import logging

from ufo_agent.driver import base
from ufo_agent.driver.libvirt import guest as libvirt_guest

LOG = logging.getLogger(__name__)

#: The deadline key of the bulk call.
KEY = 'the NIC counters of every guest'


class NicStats:
    """Bulk NIC counters over a :class:`~.host.Host`.

    ``managed`` returns the uuids of the managed guests; the driver calls
    :meth:`listed` with the domains each poll's listing returned, and
    :meth:`counters` for each guest it observes.
    """

    def __init__(self, host, managed):
        self.host = host
        self.managed = managed
        self._listing = (None, {})  # (connection generation, uuid -> dom)
        self._poll = 0
        self._fetched = (None, {}, set())   # (poll, records, served)
        self._failing = False

    def listed(self, generation, domains):
        """A poll listed ``domains`` ({uuid: domain}) on ``generation``."""
        self._listing = (generation, dict(domains))
        self._poll += 1

    def counters(self, uuid):
        """{NIC name: NicCounters} of a guest, or None: not known."""
        poll, records, served = self._fetched
        if poll != self._poll or uuid in served:
            records, served = self._fetch(), set()
            self._fetched = (self._poll, records, served)
        served.add(uuid)
        return records.get(uuid)

    def _domains(self, conn):
        """The managed guests' domains of ``conn``, listed anew if need be.

        libvirt sends the call over the connection of the domains it is
        given: they must come from the connection in use.
        """
        generation, domains = self._listing
        if generation != self.host.generation:
            listed = self.host.call(
                'list domains', conn.listAllDomains,
                self.host.libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE)
            domains = {dom.UUIDString(): dom for dom in listed}
            self._listing = (self.host.generation, domains)
        return domains

    def _fetch(self):
        """{uuid: counters or None} of the guests that can be asked."""
        host = self.host
        lv = host.libvirt
        try:
            conn = host.get_connection()
            busy = host.deadlines.outstanding()
            managed = self.managed()
            doms = [dom for uuid, dom in sorted(self._domains(conn).items())
                    if uuid in managed and uuid not in busy]
            if not doms:
                return {}
            records = host.call(
                'NIC counters', conn.domainListGetStats, doms,
                lv.VIR_DOMAIN_STATS_INTERFACE,
                getattr(lv, 'VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT', 0),
                key=KEY)
        except base.DriverError as exc:
            # Every tick would say it again.
            log = LOG.debug if self._failing else LOG.warning
            self._failing = True
            log('No NIC counters: %s', exc)
            return {}
        self._failing = False
        # A domain gone meanwhile has no record.
        return {dom.UUIDString(): libvirt_guest.nic_counters(stats)
                for dom, stats in records}
