"""The ``placement`` publisher: the CUSTOM_UFO_OVERLOADED trait.

The trait itself is created when the publisher starts (and again before
it is set, all idempotent): Placement refuses, with 400 "No such
trait(s)", every request that names an unknown trait, forbidden ones
included, so a flavor with ``trait:CUSTOM_UFO_OVERLOADED=forbidden``
could boot nowhere until a host had once been overloaded. At start it
also checks that Placement has a resource provider named after the
compute node, and logs an error naming the options when not.

The trait is on the host's compute-node resource provider while the host is
overloaded: set on entering overload, cleared on leaving it and at agent
shutdown (and on the first signal after a start, in case an earlier run
died with the trait set). Flavors with the extra spec
``trait:CUSTOM_UFO_OVERLOADED=forbidden`` then skip the host in Placement
itself, before nova-scheduler's filters run.

Updates are generation safe: read the provider's traits and generation,
add or remove only this trait, write them back with that generation, and
read again on 409 Conflict. Other traits are never touched, so traits that
nova-compute reports survive and nova-compute's own updates keep ours.
"""

import time

from keystoneauth1 import exceptions as ks_exceptions
from keystoneauth1 import loading as ks_loading
from oslo_log import log as logging

from ufo_agent import hostsignal
from ufo_agent import publishers

LOG = logging.getLogger(__name__)

TRAIT = 'CUSTOM_UFO_OVERLOADED'
MICROVERSION = '1.6'  # trait API


class PlacementError(Exception):
    """Placement refused or failed a request."""


class NoSuchProvider(PlacementError):
    """Placement has no resource provider of the node's name."""


class PlacementTraitPublisher(publishers.Publisher):

    def __init__(self, conf, host, nodename, client=None,
                 clock=time.monotonic):
        super().__init__(conf, host, nodename)
        self._client = client if client is not None else _client(conf)
        self._max_attempts = conf.publishers.placement_max_attempts
        self._retry_interval = conf.publishers.placement_retry_interval
        self._clock = clock
        self._retry_at = None
        self._rp_uuid = None
        self._applied = None   # None: unknown, else whether the trait is set
        self._trait_created = False

    def start(self):
        """Create the trait and look the node's provider up; log, not raise.

        Whatever fails here is tried again by :meth:`publish`.
        """
        try:
            self._ensure_trait()
        except Exception as exc:
            LOG.warning('Could not create trait %s in Placement, will retry: '
                        '%s. Until it exists, Placement refuses every '
                        'request of a flavor that names it.', TRAIT, exc)
        try:
            rp_uuid = self._provider()
        except NoSuchProvider as exc:
            LOG.error('%s. This host\'s %s trait cannot be set until it '
                      'is (nova-compute may not have registered the node '
                      'yet).', exc, TRAIT)
        except Exception as exc:
            LOG.warning('Could not look up the resource provider of compute '
                        'node %s in Placement, will retry: %s',
                        self.nodename, exc)
        else:
            LOG.info('Placement knows compute node %s (resource provider '
                     '%s)', self.nodename, rp_uuid)

    def publish(self, signal):
        """Create the trait if not yet done, set or clear it on change.

        Returns True when Placement was changed.
        """
        wanted = signal.state == hostsignal.OVERLOADED
        if wanted == self._applied and self._trait_created:
            return False
        now = self._clock()
        if self._retry_at is not None and now < self._retry_at:
            return False
        try:
            if not self._trait_created:
                self._ensure_trait()
            if wanted != self._applied:
                self.apply(wanted)
        except Exception as exc:
            self._retry_at = now + self._retry_interval
            LOG.warning('Could not %s trait %s on %s, will retry in %.0f s: '
                        '%s', 'set' if wanted else 'clear', TRAIT,
                        self.nodename, self._retry_interval, exc)
            return False
        self._retry_at = None
        return True

    def close(self):
        if self._applied is False:
            return
        try:
            self.apply(False)
        except Exception as exc:
            LOG.warning('Could not clear trait %s on %s at shutdown: %s',
                        TRAIT, self.nodename, exc)

    def apply(self, wanted):
        """Make the trait present (``wanted``) or absent; raise on error."""
        rp_uuid = self._provider()
        if wanted:
            self._ensure_trait()
        for attempt in range(1, self._max_attempts + 1):
            traits, generation = self._get_traits(rp_uuid)
            if (TRAIT in traits) == wanted:
                break
            new = set(traits)
            if wanted:
                new.add(TRAIT)
            else:
                new.discard(TRAIT)
            resp = self._request(
                'put', '/resource_providers/%s/traits' % rp_uuid,
                json={'traits': sorted(new),
                      'resource_provider_generation': generation})
            if resp.status_code == 200:
                break
            if resp.status_code != 409:
                raise PlacementError('PUT traits of %s: HTTP %d %s'
                                     % (rp_uuid, resp.status_code,
                                        resp.text))
            LOG.debug('Generation conflict on %s (attempt %d of %d)',
                      rp_uuid, attempt, self._max_attempts)
        else:
            raise PlacementError('gave up after %d generation conflicts on '
                                 '%s' % (self._max_attempts, rp_uuid))
        LOG.info('%s trait %s on resource provider %s (%s)',
                 'Set' if wanted else 'Cleared', TRAIT, self.nodename,
                 rp_uuid)
        self._applied = wanted

    def _request(self, method, url, **kwargs):
        return getattr(self._client, method)(
            url, microversion=MICROVERSION, raise_exc=False, **kwargs)

    def _provider(self):
        if self._rp_uuid is None:
            resp = self._request('get', '/resource_providers',
                                 params={'name': self.nodename})
            if resp.status_code != 200:
                raise PlacementError('GET resource providers: HTTP %d %s'
                                     % (resp.status_code, resp.text))
            found = resp.json()['resource_providers']
            if not found:
                raise NoSuchProvider(self._no_provider_message())
            self._rp_uuid = found[0]['uuid']
        return self._rp_uuid

    def _no_provider_message(self):
        message = ('Placement has no resource provider named %s: '
                   '[publishers] nodename must be the name of this host\'s '
                   'compute node, its hypervisor hostname ("openstack '
                   'hypervisor list"); unset, it is the host name libvirt '
                   'reports' % self.nodename)
        if self.host != self.nodename:
            # A node named after the host gives away a wrong nodename.
            resp = self._request('get', '/resource_providers',
                                 params={'name': self.host})
            if resp.status_code == 200 and resp.json()['resource_providers']:
                message += ('; a provider named %s (the host name) exists: '
                            'set [publishers] nodename = %s'
                            % (self.host, self.host))
        return message

    def _ensure_trait(self):
        # 201 Created or 204 No Content (it existed): idempotent.
        resp = self._request('put', '/traits/%s' % TRAIT)
        if resp.status_code not in (201, 204):
            raise PlacementError('PUT trait %s: HTTP %d %s'
                                 % (TRAIT, resp.status_code, resp.text))
        if not self._trait_created:
            LOG.info('Trait %s exists in Placement', TRAIT)
        self._trait_created = True

    def _get_traits(self, rp_uuid):
        resp = self._request('get', '/resource_providers/%s/traits'
                             % rp_uuid)
        if resp.status_code == 404:
            self._rp_uuid = None
        if resp.status_code != 200:
            raise PlacementError('GET traits of %s: HTTP %d %s'
                                 % (rp_uuid, resp.status_code, resp.text))
        body = resp.json()
        return body['traits'], body['resource_provider_generation']


def clear_trait(conf, hypervisor_hostname=None):
    """Best effort: remove the trait, e.g. one a dead agent left set.

    The node is named as the agent names it
    (:func:`ufo_agent.publishers.host_and_node`). Any failure (a bad
    ``[placement]`` section, Placement unreachable) is logged, not raised.
    Returns True when the trait is not set any more.
    """
    nodename = None
    try:
        host, nodename = publishers.host_and_node(conf, hypervisor_hostname)
        PlacementTraitPublisher(conf, host, nodename).apply(False)
    except Exception as exc:
        LOG.warning('Could not clear trait %s on %s: %s', TRAIT,
                    nodename or 'this host', exc)
        return False
    return True


def _client(conf):
    """A keystoneauth1 adapter for Placement from the [placement] group.

    :raises ValueError: naming the group, for an unknown ``auth_type`` or
        options the plugin needs and lacks.
    """
    group = 'placement'
    try:
        auth = ks_loading.load_auth_from_conf_options(conf, group)
        if auth is None:
            raise ValueError('[placement] auth_type is not set: the '
                             'placement publisher needs credentials for the '
                             'Placement API')
        session = ks_loading.load_session_from_conf_options(conf, group,
                                                            auth=auth)
        return ks_loading.load_adapter_from_conf_options(conf, group,
                                                         session=session,
                                                         auth=auth)
    except ks_exceptions.ClientException as exc:
        # NoMatchingPlugin (auth_type), MissingRequiredOptions, ...
        raise ValueError('[placement] auth_type=%s: %s'
                         % (conf.placement.auth_type, exc)) from exc
