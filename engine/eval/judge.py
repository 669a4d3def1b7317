"""The LLM judge: asks a model to score an answer against a rubric and keeps its reasoning.

A judge that cannot give a verdict (its model raised, its reply holds no score, the score is not
a finite number on the scale, its JSON nests deeper than :data:`~loopwright.eval.MAX_NESTING`)
yields a Score with ``passed=None``: the run is "not judged", never passed. Its reply is cleaned
like any model text (a lone surrogate becomes U+FFFD), so the report always saves.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Protocol

from ..data.events import Message, ModelRequest, TextPart
from ..data.values import clean_text
from .base import EvalContext, Observed, Score, resolve
from .files import MAX_NESTING, too_deep
from .response import text_of


class JudgeSpec(Protocol):
    """What :func:`judge` reads of a :class:`~loopwright.eval.JudgeCheck`."""

    model: Any
    prompt: str
    scale: tuple[float, float]
    threshold: float

    def label(self) -> str: ...


_SCORE_LINE = re.compile(r"score\W{0,3}\s*[:=]?\s*([-+]?\d[\d.eE+-]*)(?!\w)", re.IGNORECASE)


def parse_verdict(text: str) -> tuple[float, str] | None:
    """The score and reasoning in a judge's reply: a JSON object ``{"score": n, "reasoning":
    "..."}`` (anywhere in the text), else a ``score: n`` line (the whole reply as reasoning).
    The number is read whole (``1e999`` is infinite, not 1; the judge refuses it); None when
    the reply holds no score. Raises ValueError, saying why, for a score that is not a number
    (``4.5.6``) and for JSON nested more than MAX_NESTING levels deep."""
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidate = text[start : end + 1]
        if too_deep(candidate) is not None:
            raise ValueError(f"the judge's reply nests JSON more than {MAX_NESTING} levels deep")
        try:
            data: Any = json.loads(candidate)
        except ValueError:
            data = None
        if (
            isinstance(data, dict)
            and isinstance(data.get("score"), int | float)
            and not isinstance(data["score"], bool)
        ):
            score = data["score"]
            try:
                value = float(score)
            except OverflowError:  # an int of hundreds of digits: infinite, as its text would be
                value = math.inf if score > 0 else -math.inf
            return value, clean_text(str(data.get("reasoning", data.get("reason", ""))))
    found = _SCORE_LINE.search(text)
    if found is None:
        return None
    number = found[1].rstrip(".")  # (a sentence's full stop)
    try:
        return float(number), text.strip()
    except ValueError:
        raise ValueError(f"the judge's score {found[1]!r} is not a number") from None


def _not_judged(spec: JudgeSpec, why: str, **details: Any) -> Score:
    return Score(evaluator=spec.label(), value=None, passed=None, reason=f"not judged: {why}", details=details)


async def judge(spec: JudgeSpec, rubric: str, run: Observed, ctx: EvalContext) -> Score:
    """Score ``run``'s answer with ``spec``'s model (or the context's judge)."""
    model = spec.model if spec.model is not None else ctx.judge
    if isinstance(model, str):
        model = resolve(model)
    if model is None:
        return _not_judged(spec, "no judge model; pass judge= to evaluate(), --judge module:attr, or model: in the set")
    if run.result is None:
        return _not_judged(spec, f"the run did not finish: {run.error}")
    low, high = spec.scale
    prompt = spec.prompt.format(
        rubric=rubric,
        input="\n".join(run.case.turns),
        response=text_of(run.result.output),
        low=f"{low:g}",
        high=f"{high:g}",
    )
    request = ModelRequest(messages=[Message(role="user", parts=(TextPart(text=prompt),))])
    try:
        reply = await model.complete(request)
    except Exception as exc:
        return _not_judged(spec, f"the judge model raised {type(exc).__name__}: {exc}")
    text = clean_text(reply.text)
    try:
        verdict = parse_verdict(text)
    except ValueError as exc:
        return _not_judged(spec, str(exc), reply=text[:2000])
    if verdict is None:
        return _not_judged(spec, "the judge's reply holds no score", reply=text[:2000])
    score, reasoning = verdict
    if not math.isfinite(score):
        return _not_judged(spec, f"the judge's score {score} is not a finite number", reply=text[:2000])
    if not low <= score <= high:
        return _not_judged(spec, f"the judge's score {score:g} is off the scale {low:g}..{high:g}", reply=text[:2000])
    value = (score - low) / (high - low) if high > low else 1.0
    return Score(
        evaluator=spec.label(),
        value=value,
        passed=score >= spec.threshold,
        reason=reasoning,
        details={"score": score, "scale": [low, high], "threshold": spec.threshold},
    )


__all__ = ["judge", "parse_verdict"]
