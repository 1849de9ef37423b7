"""A stand-in for what devstack gives a plugin, for tests of devstack/."""
