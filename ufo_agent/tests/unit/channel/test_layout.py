"""The Python ABI definition and the C header must not drift."""

import os
import re
import shutil
import subprocess
import tempfile


from ufo_agent.channel import gen_header
from ufo_agent.channel import layout

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))))
HEADER = os.path.join(TOP, gen_header.HEADER_PATH)


def test_committed_header_is_generated():
    with open(HEADER) as f:
        assert f.read() == gen_header.render(), (
            'regenerate with: python -m ufo_agent.channel.gen_header %s'
            % gen_header.HEADER_PATH)


def test_areas_are_separate_cache_lines():
    assert layout.HOST_OFFSET % layout.CACHE_LINE == 0
    assert layout.GUEST_OFFSET % layout.CACHE_LINE == 0
    assert layout.HOST_OFFSET + layout.HOST_SIZE <= layout.GUEST_OFFSET
    assert layout.GUEST_OFFSET + layout.GUEST_SIZE < layout.PAGE_SIZE
    assert layout.HOST_STRUCT.size == layout.HOST_SIZE
    assert layout.GUEST_STRUCT.size == layout.GUEST_SIZE


def test_pack_unpack_roundtrip():
    values = {f.name: (tuple(range(1, f.count + 1)) if f.count > 1
                       else f.offset + 1) for f in layout.GUEST_FIELDS}
    data = layout.pack(layout.GUEST_FIELDS, layout.GUEST_STRUCT, values)
    assert layout.unpack(layout.GUEST_FIELDS, layout.GUEST_STRUCT,
                         data) == values
    # Little-endian at the documented offset.
    off = [f for f in layout.GUEST_FIELDS if f.name == 'util'][0].offset
    assert data[off:off + 4] == (off + 1).to_bytes(4, 'little')


def test_c_offsets_match_python():
    lines = ['#include <stddef.h>', '#include <stdio.h>',
             '#include "%s"' % HEADER, 'int main(void)', '{']
    expected = []
    for area, struct, base, fields in (
            ('host', 'ufo_host_area', layout.HOST_OFFSET, layout.HOST_FIELDS),
            ('guest', 'ufo_guest_area', layout.GUEST_OFFSET,
             layout.GUEST_FIELDS)):
        lines.append('printf("%s %%zu %%zu\\n", offsetof(struct %s, %s), '
                     'sizeof(struct %s));' % (area, struct, area, struct))
        expected.append('%s %d %d' % (area, base, layout.HOST_SIZE
                                      if area == 'host'
                                      else layout.GUEST_SIZE))
        for f in fields:
            lines.append(
                'printf("%s.%s %%zu %%zu\\n", offsetof(struct %s, %s), '
                'sizeof(((struct %s *)0)->%s));'
                % (area, f.name, struct, f.name, struct, f.name))
            expected.append('%s.%s %d %d' % (area, f.name, f.offset,
                                             layout.field_size(f)))
    lines.append('printf("page %zu\\n", sizeof(struct ufo_channel_page));')
    expected.append('page %d' % layout.PAGE_SIZE)
    lines += ['return 0;', '}']
    # offsetof(struct ufo_channel_page, host/guest) appear as the area rows.
    lines = [x.replace('offsetof(struct ufo_host_area, host)',
                       'offsetof(struct ufo_channel_page, host)')
             .replace('offsetof(struct ufo_guest_area, guest)',
                      'offsetof(struct ufo_channel_page, guest)')
             for x in lines]
    tmp = tempfile.mkdtemp()
    try:
        src = os.path.join(tmp, 'offsets.c')
        exe = os.path.join(tmp, 'offsets')
        with open(src, 'w') as f:
            f.write('\n'.join(lines) + '\n')
        subprocess.run(['cc', '-Wall', '-Werror', '-o', exe, src],
                       check=True)
        out = subprocess.run([exe], check=True, text=True,
                             stdout=subprocess.PIPE).stdout
    finally:
        shutil.rmtree(tmp)
    assert out.splitlines() == expected


def test_documented_layout_matches():
    with open(os.path.join(TOP, 'doc', 'source', 'channel.rst')) as f:
        doc = f.read()
    for fields in (layout.HOST_FIELDS, layout.GUEST_FIELDS):
        for f in fields:
            ctype = f.ctype + ('[%d]' % f.count if f.count > 1 else '')
            rx = r'(?m)^%d\s+%s\s+%s\s' % (f.offset, re.escape(ctype),
                                           f.name)
            assert re.search(rx, doc), 'channel.rst: %s' % f.name
