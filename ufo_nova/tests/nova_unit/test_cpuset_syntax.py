"""ufo-agent parses Nova's CPU set options as Nova 34 itself does."""

from nova import exception
from nova import test
from nova.virt import hardware

from ufo_agent import cpuset
from ufo_agent.tests.unit.hypervisor import test_managed_cpus


class CpusetSyntaxTest(test.NoDBTestCase):

    def test_every_recorded_spec_parses_as_nova_parses_it(self):
        for spec, recorded in test_managed_cpus.NOVA_PARSE_CPU_SPEC:
            try:
                novas = sorted(hardware.parse_cpu_spec(spec))
            except exception.Invalid:
                novas = None
            try:
                ours = sorted(cpuset.parse_cpuset(spec))
            except cpuset.CpusetError:
                ours = None
            self.assertEqual(novas, recorded, spec)
            self.assertEqual(novas, ours, spec)
