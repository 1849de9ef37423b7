"""Devstack's ini helpers, re-implemented for tests of the devstack plugin.

``python ini.py FUNCTION [-sudo] FILE SECTION OPTION [VALUE...]``

Each function does what devstack's ``inc/ini-config`` function of the same
name does, as its comments document and its sed scripts behave (this is our
own implementation, not devstack's code):

* A section runs from its ``[name]`` line to the next line that starts
  with ``[``; an option line is one that starts with the option's name,
  optional blanks and ``=``. Every occurrence of the section is searched.
* ``iniset``: create the file if missing; append the section (after an
  empty line) if missing; insert ``option = value`` right after the
  section's header if the option is not there, else replace the value of
  every line of that option in the section. The value is folded the way
  ``echo $value`` folds it (runs of white space become one blank).
* ``iniget``: the option's lines in the section, joined by newlines,
  everything up to the first ``=`` removed, white space folded.
* ``iniget_multiline``: the value of each of the option's lines (name,
  blanks, ``=`` and blanks removed), joined by one blank.
* ``iniset_multiline``: append the section if missing, else delete every
  line of the option in the section; then write one ``option = value`` line
  per value right after the section's header, in the order given.
* ``iniadd``: ``iniset_multiline`` of the values ``iniget_multiline``
  returns followed by the new ones (duplicates are not removed).
* ``inidelete``: delete every line of the option in the section.
* ``ini_has_option``: exit status 0 if the option has a line in the
  section, else 1.

``-sudo`` is accepted and ignored: tests write files they own.
"""

import os
import re
import sys


def _fold(text):
    return ' '.join(text.split())


def _read(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return f.read().splitlines()


def _write(path, lines):
    with open(path, 'w') as f:
        f.write(''.join(line + '\n' for line in lines))


def _option_re(option):
    return re.compile(r'^%s[ \t]*=' % re.escape(option))


def _in_section(lines, section):
    """Indexes of the lines inside ``section``, header lines excluded."""
    inside, out = False, []
    for i, line in enumerate(lines):
        if line.startswith('['):
            inside = line.startswith('[%s]' % section)
            continue
        if inside:
            out.append(i)
    return out


def _headers(lines, section):
    return [i for i, line in enumerate(lines)
            if line.startswith('[%s]' % section)]


def _option_lines(lines, section, option):
    pattern = _option_re(option)
    return [i for i in _in_section(lines, section) if pattern.match(lines[i])]


def _append_section(lines, section):
    lines.extend(['', '[%s]' % section])


def _insert_after_headers(lines, section, new):
    for i in reversed(_headers(lines, section)):
        lines[i + 1:i + 1] = new


def iniset(path, section, option, value=''):
    value = _fold(value)
    if not section or not option:
        return 0
    lines = _read(path)
    if not _headers(lines, section):
        _append_section(lines, section)
    found = _option_lines(lines, section, option)
    if not found:
        _insert_after_headers(lines, section, ['%s = %s' % (option, value)])
    else:
        keep = re.compile(r'^(%s[ \t]*=[ \t]*)' % re.escape(option))
        for i in found:
            lines[i] = keep.match(lines[i]).group(1) + value
    _write(path, lines)
    return 0


def iniget(path, section, option):
    lines = _read(path)
    text = '\n'.join(lines[i] for i in _option_lines(lines, section, option))
    print(_fold(text.split('=', 1)[1] if '=' in text else text))
    return 0


def _multiline_values(lines, section, option):
    strip = re.compile(r'^%s[ \t]*=[ \t]*' % re.escape(option))
    return [strip.sub('', lines[i], count=1)
            for i in _option_lines(lines, section, option)]


def iniget_multiline(path, section, option):
    lines = _read(path)
    print(_fold(' '.join(_multiline_values(lines, section, option))))
    return 0


def iniset_multiline(path, section, option, *values):
    lines = _read(path)
    if not _headers(lines, section):
        _append_section(lines, section)
    else:
        drop = set(_option_lines(lines, section, option))
        lines = [line for i, line in enumerate(lines) if i not in drop]
    # Values are split on white space, as the unquoted $@ of devstack's.
    words = ' '.join(values).split()
    _insert_after_headers(lines, section,
                          ['%s = %s' % (option, v) for v in words])
    _write(path, lines)
    return 0


def iniadd(path, section, option, *values):
    old = _multiline_values(_read(path), section, option)
    return iniset_multiline(path, section, option, *(old + list(values)))


def inidelete(path, section, option):
    if not section or not option:
        return 0
    lines = _read(path)
    drop = set(_option_lines(lines, section, option))
    _write(path, [line for i, line in enumerate(lines) if i not in drop])
    return 0


def ini_has_option(path, section, option):
    return 0 if _option_lines(_read(path), section, option) else 1


FUNCTIONS = {f.__name__: f for f in (
    iniset, iniget, iniget_multiline, iniset_multiline, iniadd, inidelete,
    ini_has_option)}


def main(argv):
    name, args = argv[0], list(argv[1:])
    if args and args[0] == '-sudo':
        args.pop(0)
    return FUNCTIONS[name](*args)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
