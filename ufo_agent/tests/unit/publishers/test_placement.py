"""PlacementTraitPublisher against a scripted Placement client.

The real Placement is exercised in ufo_nova/tests/functional.
"""

import logging

import pytest

from ufo_agent import hostsignal
from ufo_agent.publishers import placement

RP = 'c0ffee00-0000-0000-0000-000000000001'


class Resp:
    def __init__(self, status, body=None):
        self.status_code = status
        self._body = body
        self.text = str(body)

    def json(self):
        return self._body


class FakePlacement:
    """Provider traits with a generation, and optional 409 injections."""

    def __init__(self, traits=('COMPUTE_NODE', 'CUSTOM_OTHER'),
                 conflicts=0, providers=('node1',)):
        self.traits = set(traits)
        # Traits Placement knows; a custom one exists once PUT.
        self.known = {'COMPUTE_NODE'} | self.traits
        self.providers = providers
        self.generation = 7
        self.conflicts = conflicts
        self.down = False
        self.calls = []

    def get(self, url, microversion=None, raise_exc=True, params=None):
        self.calls.append(('GET', url))
        assert microversion == '1.6' and raise_exc is False
        if self.down:
            raise ConnectionError('Placement is down')
        if url == '/resource_providers':
            return Resp(200, {'resource_providers': [{'uuid': RP}]}
                        if params['name'] in self.providers else
                        {'resource_providers': []})
        return Resp(200, {'traits': sorted(self.traits),
                          'resource_provider_generation': self.generation})

    def put(self, url, microversion=None, raise_exc=True, json=None):
        self.calls.append(('PUT', url))
        if self.down:
            raise ConnectionError('Placement is down')
        if url.startswith('/traits/'):
            name = url[len('/traits/'):]
            if name in self.known:
                return Resp(204)
            self.known.add(name)
            return Resp(201)
        if not set(json['traits']) <= self.known:
            return Resp(400, 'No such trait(s)')
        if self.conflicts:
            self.conflicts -= 1
            self.generation += 1  # somebody else wrote
            return Resp(409, {'errors': [{'code': 'placement.concurrent'}]})
        if json['resource_provider_generation'] != self.generation:
            return Resp(409)
        self.traits = set(json['traits'])
        self.generation += 1
        return Resp(200, json)


def sig(state, seq=1):
    return hostsignal.HostSignal(
        state=state, idle_cores=0, reclaimable_cores=0, managed_cores=8,
        unmet_cores=1 if state == hostsignal.OVERLOADED else 0,
        sequence=seq, timestamp=0.0, source='s')


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def make(conf, fake, node='node1', clock=None):
    return placement.PlacementTraitPublisher(conf, 'host1', node,
                                             client=fake,
                                             clock=clock or Clock())


def test_set_and_clear_keep_other_traits(conf):
    fake = FakePlacement()
    pub = make(conf, fake)
    assert pub.publish(sig(hostsignal.OVERLOADED))
    assert fake.traits == {'COMPUTE_NODE', 'CUSTOM_OTHER', placement.TRAIT}
    assert not pub.publish(sig(hostsignal.OVERLOADED, 2))  # no call
    assert pub.publish(sig(hostsignal.UNDERLOADED, 3))
    assert fake.traits == {'COMPUTE_NODE', 'CUSTOM_OTHER'}


def test_first_signal_clears_a_leftover_trait(conf):
    fake = FakePlacement(traits={'COMPUTE_NODE', placement.TRAIT})
    assert make(conf, fake).publish(sig(hostsignal.SATURATED))
    assert fake.traits == {'COMPUTE_NODE'}


def test_retries_on_conflict(conf):
    fake = FakePlacement(conflicts=2)
    assert make(conf, fake).publish(sig(hostsignal.OVERLOADED))
    assert placement.TRAIT in fake.traits
    puts = [c for c in fake.calls if c == ('PUT', '/resource_providers/%s/'
                                           'traits' % RP)]
    assert len(puts) == 3


def test_gives_up_after_max_attempts_and_retries_later(conf):
    conf.set_override('placement_max_attempts', 2, group='publishers')
    fake = FakePlacement(conflicts=5)
    clock = Clock()
    pub = make(conf, fake, clock=clock)
    assert not pub.publish(sig(hostsignal.OVERLOADED))
    assert placement.TRAIT not in fake.traits
    fake.conflicts = 0
    # Not before placement_retry_interval (10 s) has passed.
    calls = len(fake.calls)
    clock.now = 9.9
    assert not pub.publish(sig(hostsignal.OVERLOADED, 2))
    assert len(fake.calls) == calls
    clock.now = 10.0
    assert pub.publish(sig(hostsignal.OVERLOADED, 3))
    assert placement.TRAIT in fake.traits


def test_missing_provider_is_reported_and_retried(conf):
    fake = FakePlacement()
    pub = make(conf, fake, node='unknown-node')
    with pytest.raises(placement.PlacementError, match='no resource provider'):
        pub.apply(True)
    assert not pub.publish(sig(hostsignal.OVERLOADED))


def test_start_creates_the_trait_and_touches_no_provider(conf, caplog):
    """The trait exists as soon as the publisher started.

    A flavor that forbids it must boot before any host was ever
    overloaded: Placement refuses requests naming unknown traits.
    """
    fake = FakePlacement()
    pub = make(conf, fake)
    with caplog.at_level(logging.INFO):
        pub.start()
    assert placement.TRAIT in fake.known
    assert fake.traits == {'COMPUTE_NODE', 'CUSTOM_OTHER'}
    assert 'Placement knows compute node node1' in caplog.text
    # Again (another agent, a restart): 204, no error.
    make(conf, fake).start()
    assert fake.calls.count(('PUT', '/traits/' + placement.TRAIT)) == 2


def test_start_names_the_options_when_placement_has_no_such_node(conf,
                                                                 caplog):
    fake = FakePlacement(providers=('host1',))
    with caplog.at_level(logging.WARNING):
        make(conf, fake, node='host1.example.org').start()
    [error] = [r for r in caplog.records if r.levelno == logging.ERROR]
    message = error.getMessage()
    assert 'no resource provider named host1.example.org' in message
    assert '[publishers] nodename' in message
    # A provider named after the host exists: say so.
    assert 'set [publishers] nodename = host1' in message
    # The trait is created all the same.
    assert placement.TRAIT in fake.known


def test_trait_is_created_later_when_placement_was_down_at_start(conf):
    fake = FakePlacement()
    clock = Clock()
    pub = make(conf, fake, clock=clock)
    fake.down = True
    pub.start()  # logs, does not raise
    assert placement.TRAIT not in fake.known
    assert not pub.publish(sig(hostsignal.SATURATED))
    fake.down = False
    clock.now = 10.0
    assert pub.publish(sig(hostsignal.SATURATED, 2))
    assert placement.TRAIT in fake.known
    assert placement.TRAIT not in fake.traits
    # Created once: no further calls while nothing changes.
    calls = len(fake.calls)
    assert not pub.publish(sig(hostsignal.SATURATED, 3))
    assert len(fake.calls) == calls


def test_close_clears_unless_known_clear(conf):
    fake = FakePlacement()
    pub = make(conf, fake)
    pub.publish(sig(hostsignal.OVERLOADED))
    pub.close()
    assert placement.TRAIT not in fake.traits
    calls = len(fake.calls)
    pub.close()  # already clear: nothing to do
    assert len(fake.calls) == calls


def test_client_needs_auth_type(conf):
    with pytest.raises(ValueError, match=r'\[placement\] auth_type'):
        placement._client(conf)


@pytest.mark.parametrize('options, complaint', [
    ({'auth_type': 'pasword'}, r'pasword.*could not be found'),
    ({'auth_type': 'password'}, r'auth_url|Auth plugin requires'),
])
def test_a_wrong_placement_section_names_it(conf, options, complaint):
    # keystoneauth's own exceptions would end ufo-agent in a traceback
    # instead of "Cannot start: [placement] ...".
    for name, value in options.items():
        conf.set_override(name, value, group='placement')
    with pytest.raises(ValueError, match=r'^\[placement\] auth_type='
                       r'.*(%s)' % complaint):
        placement._client(conf)
