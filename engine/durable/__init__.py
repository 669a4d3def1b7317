"""Floor 9, durable runs: who owns a run, the checkpoints a store keeps, resuming from them, and the
checks a saved state passes before it runs again (:mod:`~loopwright.durable.trust`).
"""
