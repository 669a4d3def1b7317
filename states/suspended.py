"""suspended: a run waiting on the outside world. The runner pauses when a run enters it and
returns the result (outcome "suspended", with its pending requests); this handler runs when the
run is resumed.

Reads ``pending``, ``wait_deadline``, ``time_left`` and the decisions handed to ``resume`` (in
``ctx.decisions``, never saved); writes ``deadline`` (``timeout_s`` does not run while a run
waits). Past the wait deadline every pending call is denied (timed out), whatever was decided.
"""

from __future__ import annotations

import time

from loopwright.decisions import Deny
from loopwright.events import Resumed
from loopwright.run_state import RunContext, RunState


async def suspended(rs: RunState, ctx: RunContext) -> None:
    now = time.time()
    timed_out = rs.wait_deadline is not None and now > rs.wait_deadline
    if timed_out:
        ctx.decisions = {
            r.call_id: Deny(reason=f"timed out: no decision within wait_timeout_s={rs.limits.wait_timeout_s:g}")
            for r in rs.pending
        }
    if rs.time_left is not None:
        rs.deadline = now + rs.time_left
        rs.time_left = None
    rs.wait_deadline = None
    ctx.emit(Resumed, decided=tuple(sorted(ctx.decisions)), timed_out=timed_out)
