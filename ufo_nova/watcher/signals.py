"""Where the overload-relief strategy reads UFO's host signals from.

:class:`PrometheusSignalSource` reads what the agents export (in a cloud:
``ufo_host_state`` and the other host-signal metrics, scraped by the
Prometheus that Watcher's own ``prometheus`` or ``aetos`` datasource
queries); :class:`DirectSignalSource` is fed the agents' signals directly
(the cloud simulator). Neither imports Watcher: the Prometheus source
takes the client (python-observabilityclient's ``PrometheusAPIClient``)
from Watcher's datasource.
"""

import abc
import bisect
import collections
import logging

from ufo_agent import hostsignal

LOG = logging.getLogger(__name__)


class SignalSource(metaclass=abc.ABCMeta):
    """Host-signal histories and recent CPU use of instances."""

    @abc.abstractmethod
    def histories(self, hosts, now, window_s):
        """``{host: [HostSignal, ...]}``, oldest first.

        :param hosts: Nova compute host names (Watcher's
            ``ComputeNode.hostname``); hosts without a signal are left out.
        :param window_s: how far back from ``now`` the caller looks.
        """

    def instance_cores(self, uuids, now, period_s):
        """``{uuid: cores}``: mean CPU use over ``period_s``, where known."""
        return {}


class DirectSignalSource(SignalSource):
    """Signals handed over as the agents emit them (the simulator)."""

    def __init__(self, keep_s=3600.0):
        self.keep_s = keep_s
        self._signals = collections.defaultdict(list)
        self._cores = {}

    def record(self, host, signal):
        """Add a :class:`HostSignal` of ``host``, in timestamp order."""
        signals = self._signals[host]
        if signals and signal.timestamp < signals[-1].timestamp:
            raise ValueError('signal of %s at %r is older than the last '
                             'one (%r)' % (host, signal.timestamp,
                                           signals[-1].timestamp))
        signals.append(signal)
        horizon = signal.timestamp - self.keep_s
        if signals[0].timestamp < horizon:
            times = [s.timestamp for s in signals]
            del signals[:bisect.bisect_left(times, horizon)]

    def set_instance_cores(self, uuid, cores):
        """The recent CPU use of an instance in cores (None: unknown)."""
        if cores is None:
            self._cores.pop(uuid, None)
        else:
            self._cores[uuid] = float(cores)

    def histories(self, hosts, now, window_s):
        out = {}
        for host in hosts:
            signals = [s for s in self._signals.get(host, ())
                       if now - window_s <= s.timestamp <= now]
            if signals:
                out[host] = signals
        return out

    def instance_cores(self, uuids, now, period_s):
        return {u: self._cores[u] for u in uuids if u in self._cores}


# The agent's metrics (ufo_agent/service/metrics.py) that make a signal.
_STATE = 'ufo_host_state'
_FIGURES = {
    'ufo_host_signal_reclaimable_cores': 'reclaimable_cores',
    'ufo_host_signal_unmet_cores': 'unmet_cores',
    'ufo_host_signal_sequence': 'sequence',
    'ufo_managed_cores': 'managed_cores',
    'ufo_pool_cores': 'pool_idle_cores',
}
SIGNAL_QUERY = '{__name__=~"%s"}[%ds]'
CPU_QUERY = 'avg_over_time(ufo_vm_utilization_vcpus[%ds])'


def resolve_hosts(hosts, labels):
    """``{host: label}``: the Prometheus host label value of each host.

    The rule of Watcher's Prometheus datasource: the label equals the
    host name, or the host name is the label's first DNS component
    (``compute1`` for ``compute1.example.com``).
    """
    labels = set(labels)
    short = {}
    for label in sorted(labels):
        if '.' in label:
            short.setdefault(label.split('.')[0], label)
    out = {}
    for host in hosts:
        if host in labels:
            out[host] = host
        elif host in short:
            out[host] = short[host]
    return out


class PrometheusSignalSource(SignalSource):
    """The agents' host signals as Prometheus scraped them.

    Each scrape of an agent is one signal: its samples share the scrape's
    timestamp. The history is the raw samples of the window (a range
    vector), so a scrape the agent missed is a gap the decision sees.

    :param client: a python-observabilityclient ``PrometheusAPIClient``,
        as Watcher's Prometheus and Aetos datasources hold it
        (``datasource.prometheus``).
    :param host_label: the label naming the compute host on the agents'
        scrape targets (Watcher's ``[prometheus_client] fqdn_label``).
    """

    def __init__(self, client, host_label='fqdn'):
        self.client = client
        self.host_label = host_label

    @classmethod
    def from_watcher_datasource(cls, datasource):
        """The source reading through a Watcher Prometheus datasource."""
        return cls(datasource.prometheus, datasource.prometheus_fqdn_label)

    def _matrix(self, query, now):
        # The client's public query() parses instant vectors only; a range
        # vector needs the raw endpoint, which Watcher's datasource also
        # calls through _get (for targets and metric names).
        decoded = self.client._get('query', {'query': query, 'time': now})
        data = decoded['data']
        if data['resultType'] != 'matrix':
            raise ValueError('expected a matrix for %r, got %s'
                             % (query, data['resultType']))
        return data['result']

    def histories(self, hosts, now, window_s):
        names = '|'.join([_STATE] + sorted(_FIGURES))
        query = SIGNAL_QUERY % (names, max(1, int(window_s)))
        scrapes = collections.defaultdict(
            lambda: collections.defaultdict(dict))
        for series in self._matrix(query, now):
            labels = series['metric']
            label = labels.get(self.host_label)
            name = labels.get('__name__')
            if label is None:
                continue
            if name == _STATE:
                state = labels.get('state')
                for t, value in series['values']:
                    if float(value) == 1.0:
                        scrapes[label][float(t)]['state'] = state
                continue
            if name == 'ufo_pool_cores' and labels.get('pool') != 'idle':
                continue
            field = _FIGURES.get(name)
            if field is None:
                continue
            for t, value in series['values']:
                scrapes[label][float(t)][field] = int(float(value))
        resolved = resolve_hosts(hosts, scrapes)
        out = {}
        for host, label in resolved.items():
            signals = []
            for t in sorted(scrapes[label]):
                signal = _signal(scrapes[label][t], t, label)
                if signal is not None:
                    signals.append(signal)
            if signals:
                out[host] = signals
        missing = set(hosts) - set(resolved)
        if missing:
            LOG.debug('No UFO signal in Prometheus for %s',
                      ', '.join(sorted(missing)))
        return out

    def instance_cores(self, uuids, now, period_s):
        wanted = set(uuids)
        out = {}
        for metric in self.client.query(CPU_QUERY % max(1, int(period_s))):
            uuid = metric.labels.get('uuid')
            if uuid in wanted:
                out[uuid] = float(metric.value)
        return out


def _signal(fields, timestamp, label):
    """A HostSignal from one scrape's samples, None when incomplete."""
    needed = ('state', 'reclaimable_cores', 'unmet_cores', 'sequence',
              'managed_cores', 'pool_idle_cores')
    if any(k not in fields for k in needed):
        return None
    if fields['state'] not in hostsignal.STATES:
        return None
    # The signal's idle cores are not exported; they are the idle pool
    # less what offloaded I/O keeps busy there, which the reclaimable
    # cores also are (HostUsage.from_plan): the smaller is the signal's.
    idle = min(fields['pool_idle_cores'], fields['reclaimable_cores'])
    try:
        return hostsignal.HostSignal(
            state=fields['state'], idle_cores=idle,
            reclaimable_cores=fields['reclaimable_cores'],
            managed_cores=fields['managed_cores'],
            unmet_cores=fields['unmet_cores'], sequence=fields['sequence'],
            timestamp=timestamp, source='prometheus:%s' % label)
    except ValueError:
        LOG.warning('Ignoring an invalid UFO signal of %s at %s: %r', label,
                    timestamp, fields)
        return None
