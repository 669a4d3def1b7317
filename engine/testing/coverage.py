"""Row coverage: which rows of which machines runs took (an observer, for the pytest plugin)."""

from __future__ import annotations

from collections import Counter
from typing import Any


class RowCoverage:
    """Counts the rows runs take, per machine, while installed (``instrument(coverage)``)."""

    def __init__(self) -> None:
        self.taken: Counter[tuple[int, Any]] = Counter()
        self.machines: dict[int, Any] = {}

    def reset(self) -> None:
        self.taken.clear()
        self.machines.clear()

    def on_transition(self, run: Any, row: Any) -> None:
        machine = run.machine
        self.machines[id(machine)] = machine
        self.taken[(id(machine), row)] += 1

    def missing(self, machine: Any) -> list[Any]:
        """The rows of ``machine`` no run took."""
        return [r for r in machine.rows if (id(machine), r) not in self.taken]

    def rows_taken(self) -> set[Any]:
        """Every row taken, on any machine (machines composed from one core share its rows)."""
        return {row for _machine, row in self.taken}


coverage = RowCoverage()
"""The coverage the pytest plugin installs for the session."""
