"""A write-critique loop that ends early: the critic calls ``exit_loop`` once the draft is good.

    python examples/workflows_loop.py                 # run it: the rounds, and why it stopped
    python examples/workflows_loop.py diagram         # its machine: the loop's back edge is bounded
    loopwright check examples.workflows_loop:refine

``LoopAgent`` runs ``writer`` then ``critic`` again and again, at most ``max_iterations=4``
rounds (a loop without ``max_iterations`` is refused: there is no default). The writer reads the
critic's last words through ``{critic?}`` (``?``: missing in the first round); the critic ends
the loop with the ``exit_loop`` tool. Without it the loop would stop after four rounds anyway.
"""

from __future__ import annotations

import sys

from loopwright import Agent, ModelRequest, ModelResponse, Runner, ScriptedModel, TextPart, ToolCall, diagram
from loopwright.workflows import LoopAgent, exit_loop


def writer_model(request: ModelRequest) -> ModelResponse:
    feedback = request.instructions[-1].text if request.instructions else ""
    words = 12 if "shorter" in feedback else 40
    return ModelResponse(parts=(TextPart(text=f"a {words}-word haiku about autumn"),), stop_reason="end_turn")


def critic_model(request: ModelRequest) -> ModelResponse:
    draft = request.instructions[-1].text
    answered = any(p.type == "tool_result" for m in request.messages for p in m.parts)
    if answered:
        return ModelResponse(parts=(TextPart(text="approved"),), stop_reason="end_turn")
    if "40-word" in draft:
        return ModelResponse(
            parts=(TextPart(text="shorter, please: a haiku has 17 syllables"),), stop_reason="end_turn"
        )
    return ModelResponse(parts=(ToolCall(name="exit_loop", args={}),), stop_reason="tool_use")


refine = LoopAgent(
    "refine",
    body=[
        Agent(name="writer", model=ScriptedModel(writer_model), instruction="Write a haiku. Feedback: {critic?}"),
        Agent(name="critic", model=ScriptedModel(critic_model), instruction="Judge: {writer}", tools=[exit_loop]),
    ],
    max_iterations=4,
)


def main() -> None:
    if sys.argv[1:] == ["diagram"]:
        print(diagram(refine), end="")
        return
    result = Runner(refine).run_sync("A haiku about autumn, please.")
    rounds = result.trace.count("writer")
    print(f"outcome: {result.outcome}")
    print(f"rounds: {rounds} of at most 4")
    print(f"trace: {' -> '.join(result.trace)}")
    print(f"draft: {result.state['writer']}")


if __name__ == "__main__":
    main()
