"""Floor 5, what a stage runs with: the run's context and event log, the agent's definition, tools,
model calls, nested runs, observers and logging. Imports ``data``, ``models`` and ``table``.
"""
