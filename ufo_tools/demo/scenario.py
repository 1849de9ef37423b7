"""What the demo does over time: load phases and the agent's settings.

Two latency-critical guests (``lc-a``, ``lc-b``) get changing load, one
guest (``idle``) never does. Each phase sets a request rate per LC guest;
the workload serves 500 us requests on two worker threads: 2400/s keeps
two vCPUs 60% busy but is more than one vCPU can serve (its queue and
latency grow), 300/s keeps one 15% busy: light, and well above the
agent's ``idle_util`` here (:data:`IDLE_UTIL`).
"""

import dataclasses

HIGH = 2400
LOW = 300
#: QoS target of the LC guests' workload: p99 latency in ms.
QOS_P99_MS = 20.0
#: Each phase's length in each run (``ufo-demo --phase-seconds``).
PHASE_SECONDS = 30.0
#: The agent's ``idle_after`` here (seconds; ``ufo-demo --idle-after``).
IDLE_AFTER = 8.0
#: The agent's ``idle_util`` here (% of one CPU; ``ufo-demo --idle-util``).
#: A TCG guest with nothing to do shows 1-3 % busy now and then on a busy
#: host, above the 1 % default meant for KVM guests: with that default the
#: idle guest's ``idle_after`` clock restarts at random.
IDLE_UTIL = 5.0
GUESTS = ('lc-a', 'lc-b', 'idle')
LC_GUESTS = ('lc-a', 'lc-b')


@dataclasses.dataclass(frozen=True)
class Phase:
    name: str
    rates: dict     # guest -> requests/s (0: no workload)

    def describe(self):
        return ', '.join('%s %s' % (g, _load_word(self.rates.get(g, 0)))
                         for g in LC_GUESTS)


def _load_word(rate):
    if rate >= HIGH:
        return 'busy (%d req/s)' % rate
    if rate:
        return 'light (%d req/s)' % rate
    return 'quiet'


PHASES = (
    Phase('a-busy', {'lc-a': HIGH, 'lc-b': 0}),
    Phase('both-busy', {'lc-a': HIGH, 'lc-b': HIGH}),
    Phase('b-busy', {'lc-a': 0, 'lc-b': HIGH}),
    Phase('both-light', {'lc-a': LOW, 'lc-b': LOW}),
)


def agent_options(managed_cores, idle_after=IDLE_AFTER,
                  idle_util=IDLE_UTIL):
    """ufo-agent options for the demo host (``group__name`` keys).

    Under four managed cores the small-host mode (doc/source/
    controller.rst) lets one busy guest hold every core; with the
    defaults no guest could ever hold more than one core there.
    """
    options = {'controller__idle_after': str(idle_after),
               'controller__idle_util': str(idle_util)}
    if managed_cores < 4:
        options.update({'controller__emulator_min_cores': '0',
                        'controller__idle_pool_min_cores': '0'})
    return options
