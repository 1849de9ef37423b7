"""The UFO guest/host channel ABI: the single definition of the shared page.

This module is the source of truth for both sides. The C header of the
guest kernel module (``guest_image/ufo-guest/ufo_channel.h``) is generated
from it by ``python -m ufo_agent.channel.gen_header`` and a unit test checks
that the committed header equals the generated one and that a C compiler
places every field at the offset given here.

The page is 4096 bytes, little-endian. The host writes only the host area
(first two cache lines), the guest writes only the guest area (cache lines
2 to 4); the rest is reserved and must be zero. Each area carries its own
sequence counter used as a seqlock: the writer makes it odd, writes the
fields, then makes it even again; a reader retries while it is odd or when
it changed during the read. See doc/source/channel.rst.
"""

import collections
import struct

PAGE_SIZE = 4096
CACHE_LINE = 64
ABI_VERSION = 1

# "UFOH" and "UFOG" read as little-endian u32.
HOST_MAGIC = 0x484F4655
GUEST_MAGIC = 0x474F4655

# Width of the guest's online-vCPU mask, in CPUs.
MASK_CPUS = 256
MASK_WORDS = MASK_CPUS // 64

# Guest state flags (guest area "flags").
GUEST_FLAG_HOST_VALID = 1 << 0      # host area passed the last check
GUEST_FLAG_WATCHDOG = 1 << 1        # heartbeat stale: every vCPU online
GUEST_FLAG_APPLYING = 1 << 2        # a target is being applied
GUEST_FLAG_SCHED_IN = 1 << 3        # sched_in_per_sec is published
GUEST_FLAG_LATENCY = 1 << 4         # latency_us is published
GUEST_FLAGS_KNOWN = (GUEST_FLAG_HOST_VALID | GUEST_FLAG_WATCHDOG |
                     GUEST_FLAG_APPLYING | GUEST_FLAG_SCHED_IN |
                     GUEST_FLAG_LATENCY)

# Host flags (host area "flags"); none defined yet, reserved for growth.
HOST_FLAGS_KNOWN = 0

Field = collections.namedtuple(
    'Field', ['name', 'ctype', 'offset', 'count', 'doc'])

_SIZES = {'u32': 4, 'u64': 8}
_STRUCT = {'u32': 'I', 'u64': 'Q'}

HOST_OFFSET = 0
HOST_SIZE = 2 * CACHE_LINE
GUEST_OFFSET = 2 * CACHE_LINE
# Three cache lines since the latency fields; a module that predates them
# leaves the third line as the host wrote it: zero.
GUEST_SIZE = 3 * CACHE_LINE

# Host area: written by the host, read (untrusted) by the guest.
HOST_FIELDS = (
    Field('magic', 'u32', 0, 1, 'HOST_MAGIC once the host set up the page'),
    Field('abi_version', 'u32', 4, 1, 'ABI_VERSION of the host writer'),
    Field('seq', 'u32', 8, 1, 'host seqlock: odd while the host writes'),
    Field('flags', 'u32', 12, 1, 'host flags, zero in ABI 1'),
    Field('heartbeat', 'u64', 16, 1,
          'changes at least every second while the host agent lives'),
    Field('target_vcpus', 'u32', 24, 1,
          'number of vCPUs the guest should keep online'),
    Field('target_seq', 'u32', 28, 1,
          'incremented by the host with every new target'),
    Field('max_vcpus', 'u32', 32, 1,
          'vCPUs of the domain as the host knows it (informative)'),
    Field('reserved0', 'u32', 36, 1, 'zero'),
    Field('reserved', 'u64', 40, 11, 'zero, room to grow'),
)

# Guest area: written by the guest, read (untrusted) by the host.
GUEST_FIELDS = (
    Field('magic', 'u32', 0, 1, 'GUEST_MAGIC once the module bound'),
    Field('abi_version', 'u32', 4, 1, 'ABI_VERSION of the guest module'),
    Field('seq', 'u32', 8, 1, 'guest seqlock: odd while the guest writes'),
    Field('flags', 'u32', 12, 1, 'GUEST_FLAG_* bits'),
    Field('ack_target_seq', 'u32', 16, 1,
          'target_seq of the last target the guest applied'),
    Field('applied_target', 'u32', 20, 1,
          'online vCPUs after applying that target (clamped)'),
    Field('online_vcpus', 'u32', 24, 1, 'vCPUs online now'),
    Field('present_vcpus', 'u32', 28, 1, 'vCPUs present in the guest'),
    Field('sample_count', 'u64', 32, 1,
          'number of statistics samples published'),
    Field('timestamp_ns', 'u64', 40, 1,
          'guest CLOCK_MONOTONIC at the end of the sample interval'),
    Field('interval_ns', 'u64', 48, 1, 'length of the sample interval'),
    Field('util', 'u32', 56, 1,
          'busy time of online vCPUs over the interval, in hundredths of '
          'a percent of one vCPU (0..10000 * online_vcpus)'),
    Field('steal', 'u32', 60, 1,
          'steal time over the interval, same unit as util'),
    Field('ctxsw_per_sec', 'u64', 64, 1,
          'context switches per second, without the module\'s own'),
    Field('own_ctxsw_per_sec', 'u64', 72, 1,
          'context switches per second of the module\'s own thread'),
    Field('online_mask', 'u64', 80, MASK_WORDS,
          'bit n of word n / 64 set when vCPU n is online'),
    Field('host_errors', 'u32', 112, 1,
          'host-area values the guest rejected or clamped'),
    Field('watchdog_fires', 'u32', 116, 1,
          'times the stale-heartbeat watchdog onlined every vCPU'),
    Field('sched_in_per_sec', 'u64', 120, 1,
          'switches into a thread other than the idle task, per second, '
          'without the module\'s own (with GUEST_FLAG_SCHED_IN; zero '
          'without it)'),
    Field('latency_us', 'u32', 128, 1,
          'tail latency software in the guest last published, in '
          'microseconds (with GUEST_FLAG_LATENCY; zero without it)'),
    Field('latency_seq', 'u32', 132, 1,
          'incremented by the guest with every latency_us it publishes'),
    Field('reserved', 'u64', 136, 7, 'zero, room to grow'),
)


def _check(fields, size):
    end = 0
    for f in fields:
        if f.offset != end or f.offset % _SIZES[f.ctype]:
            raise AssertionError('bad layout at %s' % f.name)
        end = f.offset + _SIZES[f.ctype] * f.count
    if end != size:
        raise AssertionError('area is %d bytes, expected %d' % (end, size))


_check(HOST_FIELDS, HOST_SIZE)
_check(GUEST_FIELDS, GUEST_SIZE)


def field_size(field):
    return _SIZES[field.ctype] * field.count


def struct_format(fields):
    """A struct module format string for one area, little-endian."""
    return '<' + ''.join(
        ('%d%s' % (f.count, _STRUCT[f.ctype])) if f.count > 1
        else _STRUCT[f.ctype] for f in fields)


HOST_STRUCT = struct.Struct(struct_format(HOST_FIELDS))
GUEST_STRUCT = struct.Struct(struct_format(GUEST_FIELDS))


def unpack(fields, st, data):
    """Decode one area into a dict; array fields become tuples."""
    values = st.unpack(data)
    out = {}
    i = 0
    for f in fields:
        if f.count > 1:
            out[f.name] = tuple(values[i:i + f.count])
        else:
            out[f.name] = values[i]
        i += f.count
    return out


GuestArea = collections.namedtuple(
    'GuestArea', [f.name for f in GUEST_FIELDS if f.name != 'reserved'])
_MASK_FIRST = [f.name for f in GUEST_FIELDS].index('online_mask')
_MASK_END = _MASK_FIRST + MASK_WORDS
# The trailing reserved words (the last field) are no field of GuestArea.
assert GUEST_FIELDS[-1].name == 'reserved'
_RESERVED_FIRST = sum(f.count for f in GUEST_FIELDS[:-1])


def unpack_guest(data):
    """Decode the guest area into a :class:`GuestArea` (see :func:`unpack`).

    A tuple, not a dict: the host reads every guest's area on each tick.
    The reserved words are left out.
    """
    values = GUEST_STRUCT.unpack(data)
    return GuestArea._make(values[:_MASK_FIRST] +
                           (values[_MASK_FIRST:_MASK_END],) +
                           values[_MASK_END:_RESERVED_FIRST])


def pack(fields, st, values):
    """Encode a dict (missing fields are zero) into one area."""
    flat = []
    for f in fields:
        v = values.get(f.name, 0 if f.count == 1 else (0,) * f.count)
        if f.count > 1:
            flat.extend(v)
        else:
            flat.append(v)
    return st.pack(*flat)


def offset(area, name):
    """Absolute offset in the page of a field of 'host' or 'guest'."""
    base, fields = ((HOST_OFFSET, HOST_FIELDS) if area == 'host'
                    else (GUEST_OFFSET, GUEST_FIELDS))
    for f in fields:
        if f.name == name:
            return base + f.offset
    raise KeyError(name)
