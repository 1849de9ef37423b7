"""What the demo does over time: the guests, load phases, agent settings.

A latency-critical guest (``lc``) serves requests at a rate that changes
by phase, beside a best-effort guest (``be``) that runs a batch job the
whole time and a guest that stays idle (``idle``). The LC workload
serves 500 us requests on two worker threads: 2000/s keeps its two vCPUs
50 % busy (a whole CPU: more than it gets beside the BE guest when the
two share the host as equals), 300/s keeps one vCPU 15 % busy. The BE job
computes units of work on two threads, as fast as its vCPUs run: its
units per second are its progress.
"""

import dataclasses

LC, BE, IDLE = 'lc', 'be', 'idle'
GUESTS = (LC, BE, IDLE)
#: Each guest's flavor extra spec ``ufo:class`` (None: not set, auto).
CLASSES = {LC: 'lc', BE: 'be', IDLE: None}
#: The LC workload: service time (us) and worker threads.
SVC_US = 500
LC_WORKERS = 2
#: Threads of the BE guest's batch job (one per vCPU).
BE_WORKERS = 2
BUSY = 2000
LIGHT = 300
#: QoS target of the LC guest's workload: p99 latency in ms.
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


@dataclasses.dataclass(frozen=True)
class Phase:
    name: str
    lc_rate: int    # requests/s of the LC guest (0: no workload)

    def describe(self):
        if self.lc_rate >= BUSY:
            load = 'busy (%d req/s)' % self.lc_rate
        elif self.lc_rate:
            load = 'light (%d req/s)' % self.lc_rate
        else:
            load = 'quiet'
        return '%s %s, %s batch job' % (LC, load, BE)


PHASES = (
    Phase('lc-light', LIGHT),
    Phase('lc-busy', BUSY),
    Phase('lc-quiet', 0),
)


def loads():
    """Phase name -> the LC guest's load in a few words."""
    return {p.name: '%d req/s' % p.lc_rate if p.lc_rate else 'quiet'
            for p in PHASES}


def agent_options(managed_cores, idle_after=IDLE_AFTER,
                  idle_util=IDLE_UTIL):
    """ufo-agent options for the demo host (``group__name`` keys).

    Under four managed cores the small-host mode (doc/source/
    controller.rst) lets one busy guest hold every core; with the
    defaults no guest could ever hold more than one core there. The BE
    guest soaks (``be_policy = soak``): its vCPUs run on every managed
    CPU at idle priority, so it gets what the LC guest leaves, on the
    LC guest's cores too, and yields them the moment the LC guest's
    vCPUs wake. On a small host there is no core to spare for an idle
    pool the BE guest would run on at normal priority: it would share
    the LC guest's cores as an equal.
    """
    options = {'controller__idle_after': str(idle_after),
               'controller__idle_util': str(idle_util),
               'controller__be_policy': 'soak'}
    if managed_cores < 4:
        options.update({'controller__emulator_min_cores': '0',
                        'controller__idle_pool_min_cores': '0'})
    return options
