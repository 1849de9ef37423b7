"""Calibration of the host model against the paper's characterization (§3).

``scenarios`` runs the paper's §3 set-ups on the model and returns
numbers; ``figures`` draws them; ``python -m ufo_sim.calibration`` writes
the PNGs and the numbers quoted in doc/source/sim-calibration.rst.
"""
