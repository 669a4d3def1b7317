"""decide: does no work. Its rows choose: ``done`` for a final answer, ``preprocess`` while
every budget has room (the bounded edge), ``salvage`` when a budget is spent, else ``done``
with outcome ``"limit"``.
"""

from __future__ import annotations

from loopwright.data.run_state import RunState
from loopwright.runtime.context import RunContext


def decide(rs: RunState, ctx: RunContext) -> None:
    return None
