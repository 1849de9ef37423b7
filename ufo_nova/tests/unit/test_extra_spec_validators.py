"""The ufo:* validators accept exactly what ufo-agent accepts."""

import re
import subprocess
import sys

import pytest

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


def test_the_latency_target_is_an_integer_in_bounds():
    for value, us in (('1', 1), (' 2500 ', 2500), ('10000000', 10 ** 7)):
        assert extraspecs.latency_target(value) == us
    for value in ('0', '-5', '10000001', '1.5', '2ms', '', 'lc'):
        with pytest.raises(ValueError):
            extraspecs.latency_target(value)


def test_percentile_values_match_the_agent():
    good = {'50': 50.0, '99': 99.0, '99.9': 99.9, ' 99.99 ': 99.99,
            '95.5': 95.5, '75': 75.0}
    bad = ('49', '49.99', '100', '99.999', '0.99', 'p99', '', '99.', '.9',
           '1e2', '9 9')
    for value, percentile in good.items():
        assert re.fullmatch(validators.PERCENTILE_PATTERN, value)
        assert extraspecs.latency_percentile(value) == percentile
    for value in bad:
        assert not re.fullmatch(validators.PERCENTILE_PATTERN, value), value
        with pytest.raises(ValueError):
            extraspecs.latency_percentile(value)
