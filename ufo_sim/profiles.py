"""Application profiles: three latency-critical services and batch work.

The LC profiles are in the spirit of the paper's Memcached, Nginx and
MySQL (Table 2): per-request guest CPU time, its distribution, worker
threads (a fixed count, or so many per vCPU of the flavor), and the
emulator (virtio/vhost) work on the way in and out. All durations are
real-world values stretched by :data:`ufo_sim.engine.spec.TIME_SCALE`;
rates are divided by it, so ``qos_p99_us`` and ``max_rps`` are in
simulated units. The QoS targets are the paper's (0.5, 2 and 15 ms)
stretched. ``max_rps`` is measured on
the model, never copied from the paper: the highest load whose p99 meets
``qos_p99_us`` with ``vcpus`` dedicated logical CPUs and the emulator
threads on CPUs of their own (paper §5.2), the mean over three seeds;
``python -m ufo_sim.calibration maxload`` re-measures it. (The paper's
350k, 120k and 50k real rps would be 7000, 2400 and 1000 here.)
"""

import dataclasses
import json
import math

from ufo_sim.engine.spec import scaled

# Service-time distributions understood by the engine.
EXP, LOGNORMAL, BIMODAL, FIXED = range(4)


@dataclasses.dataclass(frozen=True)
class AppProfile:
    """What one VM runs; durations in simulated seconds."""

    name: str
    kind: str                   # 'lc' or 'be'
    vcpus: int = 8              # flavor size used in the experiments
    threads: int = 8            # guest worker threads (a fixed count)
    # Worker threads per vCPU of the flavor, the count the service
    # starts at boot; 0: ``threads`` whatever the flavor.
    threads_per_vcpu: int = 0
    emulator_threads: int = 4   # QEMU main loop + vhost queues
    qos_p99_us: float = 0.0     # QoS target (LC), simulated microseconds
    max_rps: float = 0.0        # the 100% load point (LC), simulated
    service: float = 0.0        # mean guest CPU time per round
    dist: int = EXP
    dist_a: float = 0.0         # LOGNORMAL: CV; BIMODAL: share of long
    dist_b: float = 0.0         # BIMODAL: long/short ratio
    rounds: int = 1             # network round trips per request
    emu_in: float = 0.0         # mean emulator work per request in
    emu_out: float = 0.0        # ... and per response out
    irq: float = 0.0            # guest RX interrupt work per request in
    be_chunk: float = 0.0       # BE: CPU time between two I/Os
    be_io: float = 0.0          # BE: emulator work per I/O
    # Share of each service round spent holding the VM's hottest lock
    # (a critical section at the round's end; waiters spin).
    lock_share: float = 0.0
    # Its vCPUs' cache working set, as a share of a full refill
    # (HostSpec.cache_refill).
    cache_footprint: float = 1.0
    # How much an emulator thread on the SMT sibling slows its vCPUs:
    # work runs 1 + (HostSpec.smt_emu_slowdown - 1) x this slower. How
    # much a co-runner hurts is the victim's own property.
    smt_emu_sensitivity: float = 1.0

    @property
    def is_lc(self):
        """True for a latency-critical profile."""
        return self.kind == 'lc'

    def workers(self, vcpus):
        """Guest worker threads in a VM of ``vcpus`` vCPUs."""
        if self.threads_per_vcpu:
            return self.threads_per_vcpu * int(vcpus)
        return self.threads

    def emulator_share(self):
        """Emulator CPU per unit of guest request CPU (no overheads)."""
        if self.is_lc:
            trips = self.emu_in + self.emu_out
            return trips / self.service
        return self.be_io / self.be_chunk


# Key-value store: ~13 us GETs, exponential; one worker per vCPU
# (``-t`` set to the cores); QoS 0.5 ms.
MEMCACHED = AppProfile(
    name='memcached', kind='lc', threads_per_vcpu=1,
    qos_p99_us=scaled(500.0), max_rps=5702.0,
    service=scaled(12.7e-6), dist=EXP,
    emu_in=scaled(2e-6), emu_out=scaled(2.5e-6), irq=scaled(2e-6),
    cache_footprint=0.42)

# Web server serving 4 KiB files: ~45 us, log-normal with CV 1; the
# response carries the data, so more emulator work out than in; one
# worker per vCPU (``worker_processes auto``). QoS 2 ms.
NGINX = AppProfile(
    name='nginx', kind='lc', threads_per_vcpu=1,
    qos_p99_us=scaled(2000.0), max_rps=1897.0,
    service=scaled(45e-6), dist=LOGNORMAL, dist_a=1.0,
    emu_in=scaled(3e-6), emu_out=scaled(8e-6), irq=scaled(2e-6),
    lock_share=0.07, cache_footprint=0.5)

# OLTP transactions: 4 round trips of ~30 us, one query in ten ten times
# longer (updates, scans); 32 client connections. QoS 15 ms.
MYSQL = AppProfile(
    name='mysql', kind='lc', threads=32,
    qos_p99_us=scaled(15000.0), max_rps=699.0,
    service=scaled(30e-6), dist=BIMODAL, dist_a=0.1, dist_b=10.0,
    rounds=4, emu_in=scaled(4e-6), emu_out=scaled(4e-6),
    irq=scaled(2e-6), lock_share=0.1, smt_emu_sensitivity=3.0)

LC_PROFILES = (MEMCACHED, NGINX, MYSQL)


def BE(threads=8):
    """CPU-bound batch work: ``threads`` busy threads, rare small I/O."""
    return AppProfile(name='be', kind='be', threads=threads,
                      be_chunk=scaled(2e-3), be_io=scaled(8e-6))


# What ``PROFILE.FIELD=VALUE`` may set: the workload's shape and costs.
# Not its name, kind or flavor (``--vcpus``), nor its QoS target and max
# load, which define the experiment's loads.
OPTION_FIELDS = ('threads', 'threads_per_vcpu', 'emulator_threads',
                 'service', 'dist_a', 'dist_b', 'rounds', 'emu_in',
                 'emu_out', 'irq', 'lock_share', 'cache_footprint',
                 'smt_emu_sensitivity')
# The engine's bounds of the integer fields (per vCPU: 1024 workers in
# a VM of up to 64 vCPUs).
_MOST = {'threads': 1024, 'threads_per_vcpu': 16, 'emulator_threads': 16,
         'rounds': 1 << 20}
# ... and their lower bounds: 1 but where 0 means something.
_LEAST = {'threads_per_vcpu': 0}


def parse_option(text):
    """``PROFILE.FIELD=VALUE`` of an LC profile: ('PROFILE.FIELD', value).

    VALUE is JSON and must fit the field: an integer field (threads up
    to 1024, threads per vCPU from 0 up to 16, emulator threads up to
    16, rounds) an integer of at least 1 unless said, any other a
    number of at least 0 (durations in simulated seconds), ``service``
    above 0 and ``lock_share`` below 1.
    ValueError says what is wrong.
    """
    key, sep, raw = text.partition('=')
    name, dot, field = key.partition('.')
    names = [p.name for p in LC_PROFILES]
    if not sep or not dot or name not in names or \
            field not in OPTION_FIELDS:
        raise ValueError('%r: expected PROFILE.FIELD=VALUE with PROFILE one '
                         'of %s and FIELD one of %s'
                         % (text, ', '.join(names), ', '.join(OPTION_FIELDS)))
    try:
        value = json.loads(raw)
    except ValueError:
        raise ValueError('%r: bad value (not JSON)' % text) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError('%r: %s takes a number' % (text, field))
    if field in _MOST:
        least = _LEAST.get(field, 1)
        if not isinstance(value, int) or \
                not least <= value <= _MOST[field]:
            raise ValueError('%r: %s takes an integer from %d to %d'
                             % (text, field, least, _MOST[field]))
        return key, value
    low_ok = value > 0 if field == 'service' else value >= 0
    if not math.isfinite(value) or not low_ok or \
            (field == 'lock_share' and value >= 1):
        raise ValueError('%r: %s takes a number %s%s'
                         % (text, field,
                            'above 0' if field == 'service' else 'from 0',
                            ' to below 1' if field == 'lock_share' else ''))
    return key, float(value)


def with_options(profile, options):
    """``profile`` with the ``(PROFILE.FIELD, value)`` pairs naming it.

    Setting ``threads`` alone fixes the worker count whatever the flavor
    (``threads_per_vcpu`` 0).
    """
    mine = {key.partition('.')[2]: value for key, value in options
            if key.partition('.')[0] == profile.name}
    if 'threads' in mine:
        mine.setdefault('threads_per_vcpu', 0)
    return dataclasses.replace(profile, **mine) if mine else profile


def by_name(name):
    """The LC profile called ``name`` (or BE with 8 threads for 'be')."""
    if name == 'be':
        return BE()
    for p in LC_PROFILES:
        if p.name == name:
            return p
    raise KeyError(name)
