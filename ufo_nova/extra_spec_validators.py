"""Nova flavor extra-spec validators for UFO's ``ufo:*`` keys.

nova-api loads :func:`register` through the ``nova.api.extra_spec_validators``
entry point (setup.cfg) when ufo-nova is installed in its Python
environment. From API microversion 2.86 Nova then refuses, with 400, a
flavor extra spec ``ufo:managed`` or ``ufo:class`` whose value ufo-agent
would not accept, and any other ``ufo:`` key (a typo such as
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
    ]
