"""ufo_sim.cluster: a time-stepped co-simulation of a Nova cloud."""
