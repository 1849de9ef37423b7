"""Functional tests of the tooling: the demo on real libvirt guests."""

from ufo_tools.tests.fixtures import guest_artifacts  # noqa: F401
