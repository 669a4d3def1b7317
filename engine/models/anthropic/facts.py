"""What loopwright knows about each Claude model: the one place for per-model facts.

``facts_for(model_id)`` reads the table below. Ids are matched after the cloud and date
decorations are taken off (``anthropic.claude-opus-4-6-v1:0`` on Bedrock, ``claude-opus-4-6@20260205``
on Vertex, ``claude-haiku-4-5-20251001`` dated), so one row serves every spelling of a model.

Facts (as of anthropic 2.12 / API version 2026-10-21):

- ``max_output``: the most output tokens the model produces in one reply; ``AnthropicModel``'s
  default ``max_tokens`` (replies are streamed, so large budgets need no special handling).
- ``prefill``: the API accepts a request whose last turn is the assistant's (a prefill). Claude
  4.6 and later refuse it with 400; with thinking on no model accepts it. loopwright never
  prefills a cut reply (it asks to go on in a user turn), so this only guards user requests.
- ``thinking``: the ``thinking.type`` the model wants (``adaptive`` from 4.6 on; the SDK warns
  on ``enabled`` there).
- ``sampling``: the sampling parameters the model accepts (``temperature``, ``top_p``,
  ``top_k``). The 2.12 SDK no longer names any of them: models from 4.7 on refuse them.
- ``deprecated``: the end-of-life date the SDK announces, if any.
- ``thinking_off``: ``thinking={"type": "disabled"}`` is accepted (claude-sonnet-5-5 always
  thinks: the API answers 400).
- ``budget_tokens``: a ``thinking`` config with ``budget_tokens`` is accepted (the 5.x line takes
  adaptive thinking only: 400).
- ``structured_outputs``: the API constrains a reply to a JSON schema (``output_config.format``):
  every model of the table (4.5 on); an unknown id gets the JSON-text way only.

Unknown ids (a new model, a proxy's alias) get :data:`UNKNOWN`: a modest output budget, no
prefill, every option passed through unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SAMPLING = frozenset({"temperature", "top_p", "top_k"})


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """Per-model facts (see the module docstring)."""

    max_output: int
    prefill: bool = False
    thinking: str = "adaptive"
    sampling: frozenset[str] = frozenset()
    deprecated: str | None = None
    known: bool = True
    thinking_off: bool = True
    budget_tokens: bool = True
    structured_outputs: bool = True


_OLD_SAMPLING = SAMPLING
_TABLE: dict[str, ModelFacts] = {
    # max_output: "Max output" on each model's page, platform.claude.com/docs/en/models/<model>/overview
    # (and the comparison table of .../models/overview); a Mythos model shares its Fable twin's specs
    # the 5.x line: 128K each, Haiku included
    "claude-opus-5-5": ModelFacts(max_output=128_000, budget_tokens=False),
    "claude-sonnet-5-5": ModelFacts(max_output=128_000, budget_tokens=False, thinking_off=False),
    "claude-haiku-5-5": ModelFacts(max_output=128_000, budget_tokens=False),
    "claude-fable-5-2": ModelFacts(max_output=128_000, budget_tokens=False),
    "claude-mythos-5-2": ModelFacts(max_output=128_000, budget_tokens=False),
    "claude-fable-5-1": ModelFacts(max_output=128_000, budget_tokens=False),
    "claude-mythos-5-1": ModelFacts(max_output=128_000, budget_tokens=False),
    "claude-opus-5": ModelFacts(max_output=128_000, budget_tokens=False),
    "claude-sonnet-5": ModelFacts(max_output=128_000, budget_tokens=False),
    "claude-fable-5": ModelFacts(max_output=128_000, budget_tokens=False),
    "claude-mythos-5": ModelFacts(max_output=128_000, budget_tokens=False),
    # the 4.x line: 128K from 4.6 on, 64K for the 4.5 models
    "claude-opus-4-8": ModelFacts(max_output=128_000),
    "claude-opus-4-7": ModelFacts(max_output=128_000),
    "claude-opus-4-6": ModelFacts(max_output=128_000, sampling=_OLD_SAMPLING),
    "claude-sonnet-4-6": ModelFacts(max_output=128_000, sampling=_OLD_SAMPLING),
    "claude-mythos-preview": ModelFacts(max_output=128_000, deprecated="June 30th, 2026"),  # retired: warns so
    "claude-opus-4-5": ModelFacts(max_output=64_000, prefill=True, thinking="enabled", sampling=_OLD_SAMPLING),
    "claude-haiku-4-5": ModelFacts(max_output=64_000, prefill=True, thinking="enabled", sampling=_OLD_SAMPLING),
    "claude-sonnet-4-5": ModelFacts(
        max_output=64_000, prefill=True, thinking="enabled", sampling=_OLD_SAMPLING, deprecated="November 30th, 2026"
    ),
}
UNKNOWN = ModelFacts(max_output=16_384, sampling=SAMPLING, known=False, structured_outputs=False)
"""Facts assumed for an id the table does not know: options pass through as given."""
CURRENT = "claude-sonnet-5-5"
"""The model the README, the CLI and the error messages name."""

_DECORATION = re.compile(
    r"^(?:[a-z]{2}\.)?(?:anthropic\.)?(?P<id>claude-[a-z0-9-]+?)(?:-\d{8})?(?:-v\d+:\d+)?(?:@.*)?$"
)


def base_id(model: str) -> str:
    """``model`` without its cloud prefix, version suffix or date."""
    match = _DECORATION.match(model)
    return match.group("id") if match else model


def facts_for(model: str) -> ModelFacts:
    """The facts for ``model`` (any spelling), or :data:`UNKNOWN`."""
    return _TABLE.get(base_id(model), UNKNOWN)
