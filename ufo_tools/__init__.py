"""ufo_tools: developer tooling, not needed on any node.

Benchmarks (``bench``, ``ufo-bench``), the demo (``demo``, ``ufo-demo``),
the test-guest builder (``testguest``) and the e2e harness that runs a
real ufo-agent (``e2e``). Tooling may import ufo_agent, ufo_nova and
ufo_sim; none of them imports it. Heavy or optional packages (libvirt,
matplotlib, Nova) are imported where they are used.
"""
