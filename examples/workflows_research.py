"""A research pipeline: three agents in sequence, each reading what the one before wrote.

    python examples/workflows_research.py             # run it: the brief, and what each step left in state
    python examples/workflows_research.py diagram     # its machine, each step drawn with the agent inside
    loopwright check examples.workflows_research:pipeline

``SequentialAgent`` runs ``researcher`` (a tool agent), then ``writer`` (its instruction reads
``{notes}``, the researcher's output), then ``editor``. Each step's final output goes to session
state under its output key; the workflow's output is the last step's. The models are stand-ins
that answer from the conversation, as a real model would.
"""

from __future__ import annotations

import sys

from loopwright import Agent, ModelRequest, ModelResponse, Runner, ScriptedModel, TextPart, ToolCall, diagram, tool
from loopwright.workflows import SequentialAgent, Step

FACTS = {"tides": "Tides come from the Moon's pull; two highs a day; springs at new and full moon."}


@tool
def search(topic: str) -> str:
    """Look a topic up in the library."""
    return FACTS.get(topic, "nothing found")


def researcher_model(request: ModelRequest) -> ModelResponse:
    results = [p for m in request.messages for p in m.parts if p.type == "tool_result"]
    if not results:
        return ModelResponse(parts=(ToolCall(name="search", args={"topic": "tides"}),), stop_reason="tool_use")
    return ModelResponse(parts=(TextPart(text=f"Notes: {results[0].content}"),), stop_reason="end_turn")


def writer_model(request: ModelRequest) -> ModelResponse:
    notes = request.instructions[-1].text.split("Notes: ", 1)[-1]
    return ModelResponse(parts=(TextPart(text=f"Draft brief. {notes}"),), stop_reason="end_turn")


def editor_model(request: ModelRequest) -> ModelResponse:
    draft = request.instructions[-1].text.split(": ", 1)[-1]
    return ModelResponse(parts=(TextPart(text=draft.replace("Draft brief. ", "Brief: ")),), stop_reason="end_turn")


pipeline = SequentialAgent(
    "pipeline",
    steps=[
        Step(Agent(name="researcher", model=ScriptedModel(researcher_model), tools=[search]), output_key="notes"),
        Step(
            Agent(name="writer", model=ScriptedModel(writer_model), instruction="Write a brief from: {notes}"), "draft"
        ),
        Agent(name="editor", model=ScriptedModel(editor_model), instruction="Tighten this draft: {draft}"),
    ],
)


def main() -> None:
    if sys.argv[1:] == ["diagram"]:
        print(diagram(pipeline), end="")
        return
    result = Runner(pipeline).run_sync("Write a brief on tides.")
    print(f"outcome: {result.outcome}")
    print(f"trace: {' -> '.join(result.trace)}")
    for key in ("notes", "draft", "editor"):
        print(f"state[{key!r}]: {result.state[key]}")
    print(f"answer: {result.output}")


if __name__ == "__main__":
    main()
