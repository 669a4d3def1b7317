"""Floor 8, an agent's whole machine (the core table with its features composed): extend it
(:mod:`~loopwright.machines.extend`), verify it (:mod:`~loopwright.machines.verify`), draw it
(:mod:`~loopwright.machines.diagram`).
"""
