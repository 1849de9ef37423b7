"""The flavor extra specs ufo-agent reads: their keys and accepted values.

A contract between the agent (:mod:`ufo_agent.hypervisor.policy` reads
them from Nova's domain metadata) and nova-api
(:mod:`ufo_nova.extra_spec_validators` refuses other values), kept apart
so that the scheduler side imports these constants and nothing else of
the agent. Values are compared stripped and lowercased.
"""

MANAGED = 'ufo:managed'
CLASS = 'ufo:class'

MANAGED_TRUE = ('true', '1', 'yes', 'on')
MANAGED_FALSE = ('false', '0', 'no', 'off')

# The values of ufo_agent.controller.plan.VmClass.
CLASS_VALUES = ('lc', 'be', 'auto')
