"""An app with tools that wait, importable by a second process that resumes its runs."""

from __future__ import annotations

from typing import Any

from loopwright import Agent, CredentialRequired, Limits, Pending, RunContext, ScriptedModel, ToolCall, tool

RAN: list[tuple[str, Any]] = []
"""Every real execution of a tool: (tool, argument)."""


@tool(requires_confirmation=lambda args: args["amount"] > 100)
def pay(amount: int) -> str:
    """Pay an amount (over 100 needs approval)."""
    RAN.append(("pay", amount))
    return f"paid {amount}"


@tool(credentials=True)
def read_repo(repo: str, ctx: RunContext) -> str:
    """Read a private repository (needs a token)."""
    token = ctx.credentials.get("github_token")
    if token is None:
        raise CredentialRequired("github_token", f"a GitHub token to read {repo}")
    RAN.append(("read_repo", repo))
    return f"read {repo} with a token of {len(token)} characters"


@tool(long_running=True)
def render(video: str) -> Any:
    """Render a video (takes hours: the result arrives later)."""
    RAN.append(("render", video))
    return Pending(f"render of {video} queued")


@tool
def note(text: str) -> str:
    """Write a note."""
    RAN.append(("note", text))
    return "noted"


def make_agent(script: list[Any], **limits: Any) -> Agent:
    return Agent(
        name="ops",
        model=ScriptedModel(script),
        tools=[pay, read_repo, render, note],
        limits=Limits(retry_backoff_s=0, **limits),
    )


SCRIPT = [
    [ToolCall(id="c-pay", name="pay", args={"amount": 500}), ToolCall(id="c-note", name="note", args={"text": "hi"})],
    "all done",
]
