"""Generate the C header of the channel ABI from layout.py.

Usage: ``python -m ufo_agent.channel.gen_header [OUTPUT]``; without OUTPUT
it prints the header. The committed header is
``guest_image/ufo-guest/ufo_channel.h``.
"""

import sys
import textwrap

from ufo_agent.channel import layout

HEADER_PATH = 'guest_image/ufo-guest/ufo_channel.h'

_CTYPES = {'u32': '__le32', 'u64': '__le64'}


def _struct(name, fields):
    lines = ['struct %s {' % name]
    for f in fields:
        decl = '%s %s%s;' % (_CTYPES[f.ctype], f.name,
                             '[%d]' % f.count if f.count > 1 else '')
        if len('\t/* %s */' % f.doc) + 7 <= 80:
            lines.append('\t/* %s */' % f.doc)
        else:
            lines.append('\t/*')
            lines += ['\t * ' + x for x in textwrap.wrap(f.doc, 64)]
            lines.append('\t */')
        lines.append('\t' + decl)
    lines.append('};')
    return lines


def render():
    L = layout
    out = [
        '/* SPDX-License-Identifier: GPL-2.0 */',
        '/*',
        ' * UFO guest/host channel ABI, version %d.' % L.ABI_VERSION,
        ' *',
        ' * Generated from ufo_agent/channel/layout.py by',
        ' * "python -m ufo_agent.channel.gen_header": do not edit.',
        ' * All fields are little-endian. The host writes only the host',
        ' * area, the guest only the guest area; each area has a seqlock.',
        ' */',
        '#ifndef UFO_CHANNEL_H',
        '#define UFO_CHANNEL_H',
        '',
        '#include <linux/types.h>',
        '',
        '#define UFO_ABI_VERSION %d' % L.ABI_VERSION,
        '#define UFO_PAGE_SIZE %d' % L.PAGE_SIZE,
        '#define UFO_HOST_MAGIC 0x%08xU' % L.HOST_MAGIC,
        '#define UFO_GUEST_MAGIC 0x%08xU' % L.GUEST_MAGIC,
        '#define UFO_MASK_CPUS %d' % L.MASK_CPUS,
        '#define UFO_MASK_WORDS %d' % L.MASK_WORDS,
        '#define UFO_HOST_OFFSET %d' % L.HOST_OFFSET,
        '#define UFO_HOST_SIZE %d' % L.HOST_SIZE,
        '#define UFO_GUEST_OFFSET %d' % L.GUEST_OFFSET,
        '#define UFO_GUEST_SIZE %d' % L.GUEST_SIZE,
        '#define UFO_GUEST_FLAG_HOST_VALID 0x%xU' % L.GUEST_FLAG_HOST_VALID,
        '#define UFO_GUEST_FLAG_WATCHDOG 0x%xU' % L.GUEST_FLAG_WATCHDOG,
        '#define UFO_GUEST_FLAG_APPLYING 0x%xU' % L.GUEST_FLAG_APPLYING,
        '#define UFO_GUEST_FLAG_SCHED_IN 0x%xU' % L.GUEST_FLAG_SCHED_IN,
        '#define UFO_GUEST_FLAG_LATENCY 0x%xU' % L.GUEST_FLAG_LATENCY,
        '',
    ]
    out += _struct('ufo_host_area', L.HOST_FIELDS)
    out.append('')
    out += _struct('ufo_guest_area', L.GUEST_FIELDS)
    out += [
        '',
        'struct ufo_channel_page {',
        '\tstruct ufo_host_area host;',
        '\tstruct ufo_guest_area guest;',
        '\t/* zero, room to grow */',
        '\t__u8 reserved[%d];' % (L.PAGE_SIZE - L.HOST_SIZE - L.GUEST_SIZE),
        '};',
        '',
        '#endif /* UFO_CHANNEL_H */',
    ]
    return '\n'.join(out) + '\n'


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if argv:
        with open(argv[0], 'w') as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == '__main__':
    sys.exit(main())
