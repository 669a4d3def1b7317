"""Fan-out, fan-in: three reviewers look at one patch at once, then one agent sums up.

    python examples/workflows_fanout.py               # run it
    python examples/workflows_fanout.py diagram       # its machine: the branches as concurrent regions
    loopwright check examples.workflows_fanout:review

``ParallelAgent`` runs the branches at once, each on a copy of the session state; at the join
their writes merge (two branches writing different values to one key fail the run, naming the
key and both branches) and each branch's output lands under its name. The ``summary`` step
reads them through ``{security}``, ``{style}`` and ``{tests}``.
"""

from __future__ import annotations

import sys

from loopwright import Agent, ModelRequest, ModelResponse, Runner, ScriptedModel, TextPart, diagram
from loopwright.workflows import ParallelAgent, SequentialAgent


def reviewer(name: str, finding: str) -> Agent:
    def model(request: ModelRequest) -> ModelResponse:
        return ModelResponse(parts=(TextPart(text=finding),), stop_reason="end_turn")

    return Agent(name=name, model=ScriptedModel(model), instruction=f"Review the patch for {name} only.")


def summary_model(request: ModelRequest) -> ModelResponse:
    findings = request.instructions[-1].text.split("\n")[1:]
    return ModelResponse(
        parts=(TextPart(text=f"{len(findings)} findings: " + "; ".join(findings)),), stop_reason="end_turn"
    )


review = SequentialAgent(
    "review",
    steps=[
        ParallelAgent(
            "reviewers",
            branches=[
                reviewer("security", "security: the token is logged"),
                reviewer("style", "style: fine"),
                reviewer("tests", "tests: no test for the empty list"),
            ],
        ),
        Agent(
            name="summary",
            model=ScriptedModel(summary_model),
            instruction="Sum up the reviews:\n{security}\n{style}\n{tests}",
        ),
    ],
)


def main() -> None:
    if sys.argv[1:] == ["diagram"]:
        print(diagram(review), end="")
        return
    result = Runner(review).run_sync("Review patch #42.")
    print(f"outcome: {result.outcome}")
    print(f"trace: {' -> '.join(result.trace)}")
    print(f"answer: {result.output}")


if __name__ == "__main__":
    main()
