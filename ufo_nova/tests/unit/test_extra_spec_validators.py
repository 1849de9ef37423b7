"""The ufo:* validators accept exactly what ufo-agent accepts."""

import re
import subprocess
import sys

from ufo_agent.controller.plan import VmClass
from ufo_agent import extraspecs
from ufo_nova import extra_spec_validators as validators

CANDIDATES = ('true', 'True', ' yes ', 'ON', '1', 'false', 'No', '0', 'off',
              't', 'y', 'n', 'f', '2', 'maybe', '', ' ', 'truefalse',
              'lc', 'BE', ' auto', 'latency', 'bogus', 'lc,be')


def test_managed_values_match_the_agent():
    for value in CANDIDATES:
        agent = value.strip().lower() in (extraspecs.MANAGED_TRUE +
                                          extraspecs.MANAGED_FALSE)
        api = re.fullmatch(validators.MANAGED_PATTERN, value) is not None
        assert api == agent, value


def test_class_values_match_the_agent():
    for value in CANDIDATES:
        agent = value.strip().lower() in {c.value for c in VmClass}
        api = re.fullmatch(validators.CLASS_PATTERN, value) is not None
        assert api == agent, value


def test_import_needs_no_nova():
    # The base install has no Nova; only register() (nova-api) imports it.
    code = ('import sys; import ufo_nova.extra_spec_validators; '
            'assert not [m for m in sys.modules if m.split(".")[0] == '
            '"nova"], "nova imported"')
    subprocess.run([sys.executable, '-c', code], check=True)
