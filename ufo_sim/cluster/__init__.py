"""A cloud of simulated hosts scheduled by Nova's own code."""
