"""Nova flavor extra-spec validators for UFO's ``ufo:*`` keys.

nova-api loads :func:`register` through the ``nova.api.extra_spec_validators``
entry point (setup.cfg) when ufo-nova is installed in its Python
environment. From API microversion 2.86 Nova then refuses, with 400, a
flavor extra spec ``ufo:managed``, ``ufo:class``,
``ufo:latency_target_us`` or ``ufo:latency_percentile`` whose value
ufo-agent would not accept, and any other ``ufo:`` key (a typo such as
``ufo:manged``), instead of letting ufo-agent ignore it on the compute
node.

The accepted values are ufo-agent's own (:mod:`ufo_agent.extraspecs`),
which, like ufo-agent, ignores case and surrounding blanks. Nova is
imported only inside :func:`register`: importing this module needs no Nova
and has no side effects.
"""

from ufo_agent import extraspecs


def _one_of(values):
    # ufo-agent strips and lowercases the value before comparing.
    return r'(?i)\s*(%s)\s*' % '|'.join(values)


MANAGED_PATTERN = _one_of(extraspecs.MANAGED_TRUE +
                          extraspecs.MANAGED_FALSE)
CLASS_PATTERN = _one_of(extraspecs.CLASS_VALUES)
PERCENTILE_PATTERN = extraspecs.PERCENTILE_PATTERN


def register():
    """The validators, as Nova's ``nova.api.extra_spec_validators`` wants."""
    from nova.api.validation.extra_specs import base

    return [
        base.ExtraSpecValidator(
            name=extraspecs.MANAGED,
            description=(
                'Whether ufo-agent may manage the CPUs of instances of this '
                'flavor (shared CPU policy only; default true). false keeps '
                'ufo-agent\'s hands off: every vCPU stays on the pins Nova '
                'gave it.'),
            value={
                'type': str,
                'description': 'true, 1, yes, on, false, 0, no or off',
                'pattern': MANAGED_PATTERN,
            },
        ),
        base.ExtraSpecValidator(
            name=extraspecs.CLASS,
            description=(
                'Service class ufo-agent gives instances of this flavor: '
                'lc (latency-critical), be (best-effort) or auto (ufo-agent '
                'classifies the guest from its behaviour; the default).'),
            value={
                'type': str,
                'description': ', '.join(extraspecs.CLASS_VALUES),
                'pattern': CLASS_PATTERN,
            },
        ),
        base.ExtraSpecValidator(
            name=extraspecs.LATENCY_TARGET,
            description=(
                'Tail latency, in microseconds, that ufo-agent sizes '
                'instances of this flavor for, at ufo:latency_percentile, '
                'by the latency software in the guest publishes through '
                'the ufo_guest module (1.1.0 or later). Without it, or '
                'while the guest publishes none, ufo-agent sizes the guest '
                'by its CPU signals alone.'),
            value={
                'type': int,
                'description': 'microseconds, %d to %d' % (
                    extraspecs.LATENCY_TARGET_MIN,
                    extraspecs.LATENCY_TARGET_MAX),
                'min': extraspecs.LATENCY_TARGET_MIN,
                'max': extraspecs.LATENCY_TARGET_MAX,
            },
        ),
        base.ExtraSpecValidator(
            name=extraspecs.LATENCY_PERCENTILE,
            description=(
                'Percentile of the guest\'s latency that '
                'ufo:latency_target_us bounds (default 99).'),
            value={
                'type': str,
                'description': '50 to 99.99, at most two decimals',
                'pattern': PERCENTILE_PATTERN,
            },
        ),
    ]
