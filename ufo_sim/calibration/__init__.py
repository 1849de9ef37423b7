"""Calibration of the host model against the paper's characterization (§3).

``scenarios`` runs the paper's §3 set-ups on the model and returns
numbers; ``figures`` draws them; ``targets`` states the paper's values
(§3, §6.1) as checks on the model. ``python -m ufo_sim.calibration``
writes the PNGs and the numbers quoted in doc/source/sim-calibration.rst
(``figures``) and runs the checks (``check``).
"""
