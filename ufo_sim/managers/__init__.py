"""Core managers compared in the evaluation (paper section 5.3).

Each manager answers one question for a :class:`~ufo_sim.managers.cell.
Cell`: how many host CPUs does it hold once settled, and does every VM
meet its QoS target there. :data:`MANAGERS` names them for the CLI.
"""
