"""The worked eval example's agent and judge: loopwright's demo trip agent (scripted, no key)
and a judge on a ScriptedModel that reads the answer it is shown.

    cd examples/eval && loopwright eval run trip_agent:agent trip.yaml --judge trip_agent:judge
"""

from __future__ import annotations

import json
import re

from loopwright import ModelRequest, ModelResponse, ScriptedModel, TextPart
from loopwright.demo import demo_agent

agent = demo_agent()


def _grade(request: ModelRequest) -> ModelResponse:
    """A stand-in for an LLM judge: full marks for an answer that gives a price in USD and
    names the warmer city, fewer otherwise. A real eval passes a Claude model here."""
    prompt = request.messages[-1].text
    answer = prompt.split("The agent answered:\n", 1)[-1].split("\n\nScore it", 1)[0]
    has_price = re.search(r"\d+\.\d\d USD", answer) is not None
    has_city = re.search(r"(Lisbon|Porto) is warmer", answer) is not None
    score = 1 + 2 * has_price + 2 * has_city
    reasoning = f"price in USD: {'yes' if has_price else 'no'}; warmer city named: {'yes' if has_city else 'no'}"
    return ModelResponse(parts=(TextPart(text=json.dumps({"reasoning": reasoning, "score": score})),))


judge = ScriptedModel(_grade, name="judge")
