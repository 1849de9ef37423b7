"""A reader of the Azure public VM dataset's ``vmtable.csv``.

The file (V1 or V2 of github.com/Azure/AzurePublicDataset, optionally
gzipped) has no header; each line is one VM::

    vmid, subscriptionid, deploymentid, vmcreated, vmdeleted,
    maxcpu, avgcpu, p95maxcpu, vmcategory, vmcorecountbucket,
    vmmemorybucket

as the dataset's analysis notebooks read it. Timestamps are seconds from
the trace start (VMs already running then show 0), CPU figures are
percent of the VM's cores, vmcategory is Interactive, Delay-insensitive
or Unknown. V2 writes cores and memory (GB) as buckets named by their
upper bound (cores 2, 4, 8, 12, 24, >24; memory 2, 4, 8, 32, 64, >64);
V1 writes the counts themselves (memory may be fractional, 0.75).
"""

import csv
import gzip
import hashlib
import math

from ufo_sim.cluster import workload

COLUMNS = ('vmid', 'subscriptionid', 'deploymentid', 'vmcreated',
           'vmdeleted', 'maxcpu', 'avgcpu', 'p95maxcpu', 'vmcategory',
           'vmcorecountbucket', 'vmmemorybucket')
# The open-ended buckets, as the V2 analysis notebook maps them.
OPEN_BUCKETS = {'vmcorecountbucket': ('>24', 30.0),
                'vmmemorybucket': ('>64', 70.0)}
# Its lifetime floor: one 5-minute reading.
MIN_LIFETIME_S = 300.0
MAX_VCPUS = 16
UNKNOWN_AS = ('be', 'lc', 'skip')


class TraceError(ValueError):
    """A line of the trace that cannot be read."""


def read_vmtable(path, unknown='be', start_s=0.0, end_s=None, seed=0,
                 params=None, burst_ratio=3.0):
    """The VMs of a vmtable file as :class:`workload.VmRequest`, by arrival.

    Interactive VMs are LC with a diurnal load; Delay-insensitive ones BE,
    'idle' under ``params.idle_below`` mean load, 'bursty' when their P95
    reaches ``burst_ratio`` times their mean, else 'steady'. Unknown ones
    are read as ``unknown``: 'be', 'lc' or 'skip'. Only VMs alive in
    ``[start_s, end_s)`` of the trace are kept; times are from
    ``start_s``, and a VM created before it arrives at 0 with the rest of
    its life. Cores above 16 are capped at 16; memory is kept. The
    diurnal peak time of day (the table has no time series) and the
    per-VM seed are drawn from ``seed`` and the vmid, as
    :func:`workload.generate` draws them. TraceError names the line.
    """
    if unknown not in UNKNOWN_AS:
        raise ValueError('unknown must be one of %s, not %r'
                         % (', '.join(UNKNOWN_AS), unknown))
    params = params or workload.WorkloadParams()
    out = []
    opener = gzip.open if str(path).endswith('.gz') else open
    with opener(path, 'rt', newline='') as f:
        for lineno, row in enumerate(csv.reader(f), 1):
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            try:
                vm = _request(row, unknown, start_s, end_s, seed, params,
                              burst_ratio)
            except TraceError as exc:
                raise TraceError('%s:%d: %s' % (path, lineno, exc)) from None
            if vm is not None:
                out.append(vm)
    out.sort(key=lambda vm: (vm.arrive_s, vm.vm_id))
    return out


def _request(row, unknown, start_s, end_s, seed, params, burst_ratio):
    """One row's VmRequest, or None when it is out of the window."""
    if len(row) != len(COLUMNS):
        raise TraceError('%d columns, expected %d (%s)'
                         % (len(row), len(COLUMNS), ', '.join(COLUMNS)))
    f = dict(zip(COLUMNS, (c.strip() for c in row)))
    if not f['vmid']:
        raise TraceError('empty vmid')
    created = _number(f, 'vmcreated')
    deleted = _number(f, 'vmdeleted')
    if created < 0 or deleted < created:
        raise TraceError('vmdeleted %s before vmcreated %s (or negative)'
                         % (f['vmdeleted'], f['vmcreated']))
    cpu = {k: _number(f, k) for k in ('maxcpu', 'avgcpu', 'p95maxcpu')}
    for k, v in cpu.items():
        if not 0.0 <= v <= 100.0:
            raise TraceError('%s %s outside 0..100' % (k, f[k]))
    category = f['vmcategory']
    if category == 'Interactive':
        lc = True
    elif category == 'Delay-insensitive':
        lc = False
    elif category == 'Unknown':
        if unknown == 'skip':
            return None
        lc = unknown == 'lc'
    else:
        raise TraceError('vmcategory %r is none of Interactive, '
                         'Delay-insensitive, Unknown' % category)
    cores = _bucket(f, 'vmcorecountbucket')
    memory_gb = _bucket(f, 'vmmemorybucket')
    if cores < 1 or cores != int(cores):
        raise TraceError('vmcorecountbucket %r is not a core count'
                         % f['vmcorecountbucket'])
    if memory_gb <= 0:
        raise TraceError('vmmemorybucket %r is not a size'
                         % f['vmmemorybucket'])

    deleted = max(deleted, created + MIN_LIFETIME_S)
    if deleted <= start_s or (end_s is not None and created >= end_s):
        return None
    arrive = max(created, start_s) - start_s
    mean = cpu['avgcpu'] / 100.0
    peak = max(cpu['p95maxcpu'] / 100.0, mean)
    if lc:
        pattern = 'diurnal'
    elif mean < params.idle_below:
        pattern = 'idle'
    elif peak >= burst_ratio * mean:
        pattern = 'bursty'
    else:
        pattern = 'steady'
    vm_seed = _vm_seed(seed, f['vmid'])
    peak_h = params.diurnal_peak_hour + params.peak_spread_hours * _normal(
        vm_seed)
    return workload.VmRequest(
        vm_id=f['vmid'], arrive_s=arrive,
        lifetime_s=deleted - start_s - arrive,
        vcpus=min(int(cores), MAX_VCPUS),
        memory_mb=int(round(memory_gb * 1024)), lc=lc, pattern=pattern,
        mean_load=mean, peak_load=peak,
        phase_s=(peak_h * workload.HOUR_S) % workload.DAY_S,
        seed=vm_seed)


def _number(f, key):
    try:
        v = float(f[key])
    except ValueError:
        raise TraceError('%s %r is not a number' % (key, f[key])) from None
    if not math.isfinite(v):
        raise TraceError('%s %r is not finite' % (key, f[key]))
    return v


def _bucket(f, key):
    label, value = OPEN_BUCKETS[key]
    return value if f[key] == label else _number(f, key)


def _vm_seed(seed, vmid):
    """A stable 63-bit seed from the reader's seed and the vmid."""
    digest = hashlib.blake2b(('%d/%s' % (seed, vmid)).encode(),
                             digest_size=8).digest()
    return int.from_bytes(digest, 'big') >> 1


def _normal(vm_seed):
    """A standard normal number from a seed (Box-Muller)."""
    u1 = 1.0 - workload.hashed_unit(vm_seed, -1)
    u2 = workload.hashed_unit(vm_seed, -2)
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2 * math.pi * u2)
