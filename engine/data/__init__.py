"""Floor 1, plain values: the event log's entries and their parts, limits, the run's state, its
result, errors, stages, decisions. Imports no other floor of loopwright.
"""
