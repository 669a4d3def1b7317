"""Floor 4, the transition table: rows and guards, budgets, the rules a table is checked by, the
compiled choice of the next state (:mod:`~loopwright.table.machine`). Imports ``data`` alone.
"""
