"""A payment that waits for a person's approval, kept in SQLite, resumed exactly once.

    python examples/approval_resume.py                    # both legs, one after the other
    python examples/approval_resume.py start runs.db      # leg 1: the run stops, waiting (exit 3)
    python examples/approval_resume.py approve runs.db    # leg 2, in another process: approve and finish

The store claims the suspension when it is resumed, so approving twice (or from two processes at
once) pays once: the second ``approve`` says the run has ended. Without a store, exactly-once is
up to you (keep the saved state in one place and resume it once).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from loopwright import (
    Agent,
    ModelRequest,
    ModelResponse,
    ResumeError,
    RunContext,
    Runner,
    ScriptedModel,
    TextPart,
    ToolCall,
    approve,
    tool,
)
from loopwright.stores import SQLiteStore

RUN_ID = "invoice-7"
LEDGER = "payments.log"  # beside the database: one line per payment really made


@tool(requires_confirmation=lambda args: args["amount"] > 100)
def pay(invoice: str, amount: int, ctx: RunContext) -> str:
    """Pay an invoice (amounts over 100 need a person's approval)."""
    ledger = Path(ctx.state["ledger"])
    with ledger.open("a") as out:  # a payment API would take ctx.idempotency_key and pay once per key
        out.write(f"{ctx.idempotency_key} paid {amount} on {invoice}\n")
    return f"paid {amount} on {invoice}"


def accountant(request: ModelRequest) -> ModelResponse:
    """A stand-in for the model that answers from the conversation, as a real one would (each
    process builds its own model, so a script replayed from its start would not do)."""
    last = request.messages[-1]
    if any(part.type == "tool_result" for part in last.parts):
        return ModelResponse(parts=(TextPart(text=f"Done: {last.parts[0].content}."),))
    return ModelResponse(parts=(ToolCall(id="c1", name="pay", args={"invoice": "INV-7", "amount": 500}),))


def make_runner(db: Path) -> Runner:
    agent = Agent(name="accounts", model=ScriptedModel(accountant), tools=[pay])
    return Runner(agent, store=SQLiteStore(str(db)))


async def start(db: Path) -> int:
    result = await make_runner(db).run(
        "Pay invoice INV-7 (500)", run_id=RUN_ID, state={"ledger": str(db.parent / LEDGER)}
    )
    for request in result.pending:
        print(f"waiting: {request.kind} for {request.tool}({request.args}) [call {request.call_id}]")
    print(f"outcome: {result.outcome}")
    return 3 if result.outcome == "suspended" else 1


async def approve_and_finish(db: Path) -> int:
    try:
        result = await make_runner(db).resume(RUN_ID, {"c1": approve()})
    except ResumeError as error:
        print(f"refused: {error}")
        return 2
    print(f"outcome: {result.outcome}")
    print(f"answer: {result.output}")
    return 0 if result.outcome == "final" else 1


def payments(db: Path) -> list[str]:
    ledger = db.parent / LEDGER
    return ledger.read_text().splitlines() if ledger.exists() else []


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] in ("start", "approve"):
        db = Path(argv[1]).resolve()
        code = asyncio.run(start(db) if argv[0] == "start" else approve_and_finish(db))
        print(f"payments made: {len(payments(db))}")
        return code
    if argv:
        print("usage: approval_resume.py [start DB | approve DB]", file=sys.stderr)
        return 2
    db = Path(tempfile.mkdtemp()) / "runs.db"
    asyncio.run(start(db))
    asyncio.run(approve_and_finish(db))  # as another process would: a new runner, a new store object
    asyncio.run(approve_and_finish(db))  # approving again is refused: nothing is paid twice
    print(f"payments made: {len(payments(db))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
