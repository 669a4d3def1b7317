"""A tool agent: it looks up the weather and does arithmetic, then answers.

    python examples/claude_tool_agent.py "How much warmer is Lisbon than Oslo?"

With ``ANTHROPIC_API_KEY`` set it runs on Claude (``LOOPWRIGHT_MODEL`` names the model, default
``claude-sonnet-5-5``; ``ANTHROPIC_BASE_URL`` is honoured as the SDK honours it). Without a key it
runs on a ``ScriptedModel`` that replays the calls Claude would make, so the example runs offline.
"""

from __future__ import annotations

import os
import sys

from loopwright import Agent, Limits, Model, Runner, ScriptedModel, ToolCall, tool

TEMPERATURES_C = {"lisbon": 24.0, "oslo": 11.5, "nairobi": 22.0}


@tool
def temperature(city: str) -> float:
    """Today's temperature in a city, in degrees Celsius.

    Args:
        city: The city's English name.
    """
    try:
        return TEMPERATURES_C[city.strip().lower()]
    except KeyError:
        raise ValueError(f"no reading for {city!r}; known: {', '.join(sorted(TEMPERATURES_C))}") from None


@tool
def subtract(a: float, b: float) -> float:
    """a - b."""
    return round(a - b, 2)


def choose_model() -> Model:
    """Claude when a key is set, else a script of what Claude would do."""
    if os.environ.get("ANTHROPIC_API_KEY"):
        from loopwright import AnthropicModel

        return AnthropicModel(os.environ.get("LOOPWRIGHT_MODEL", "claude-sonnet-5-5"), max_tokens=2048)
    return ScriptedModel(
        [
            [  # two calls in one reply: they run concurrently, answered in this order
                ToolCall(name="temperature", args={"city": "Lisbon"}),
                ToolCall(name="temperature", args={"city": "Oslo"}),
            ],
            [ToolCall(name="subtract", args={"a": 24.0, "b": 11.5})],
            "Lisbon is 12.5 °C warmer than Oslo today (24 °C against 11.5 °C).",
        ]
    )


def make_agent() -> Agent:
    return Agent(
        name="weather",
        model=choose_model(),
        instruction="Answer with the temperature tool and do any arithmetic with the subtract tool.",
        tools=[temperature, subtract],
        limits=Limits(max_iterations=6, timeout_s=120),
    )


if __name__ == "__main__":
    question = sys.argv[1] if len(sys.argv) > 1 else "How much warmer is Lisbon than Oslo today?"
    agent = make_agent()
    result = Runner(agent).run_sync(question)
    calls = [e.name for e in result.events if e.type == "tool_called"]
    print(
        f"model: {getattr(agent.model, 'model', None) or getattr(agent.model, 'name', '?')}"
    )  # Claude's id, or 'scripted'
    print(f"tools called: {', '.join(calls)}")
    print(f"path: {' -> '.join(result.trace)}")
    print(f"outcome: {result.outcome}")
    print(f"answer: {result.output}")
    sys.exit(0 if result.outcome == "final" else 1)
