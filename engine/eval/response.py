"""Response checks: exact, contains, regex, ROUGE-1-like token overlap, and JSON-schema validity
(a subset of JSON Schema: ``type``, ``properties``, ``required``, ``additionalProperties``,
``items``, ``enum``, ``const``, ``minimum``/``maximum``, ``minLength``/``maxLength``,
``anyOf``; enough for an agent's answer shape, with no extra dependency)."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from pydantic import BaseModel

from .files import MAX_NESTING, too_deep

_TOKEN = re.compile(r"\w+", re.UNICODE)


def text_of(output: Any) -> str:
    """A run's output as text: a structured answer as its JSON."""
    if output is None:
        return ""
    if isinstance(output, BaseModel):
        return output.model_dump_json()
    if isinstance(output, str):
        return output
    return json.dumps(output, default=str)


def tokens(text: str) -> list[str]:
    return [t.lower() for t in _TOKEN.findall(text)]


def rouge1(candidate: str, reference: str) -> float:
    """ROUGE-1 F1: the unigram overlap of ``candidate`` and ``reference`` (case-folded words)."""
    got, want = Counter(tokens(candidate)), Counter(tokens(reference))
    if not got or not want:
        return 1.0 if not got and not want else 0.0
    overlap = sum((got & want).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / sum(got.values()), overlap / sum(want.values())
    return 2 * precision * recall / (precision + recall)


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _type_ok(value: Any, kind: str | list[str]) -> bool:
    kinds = [kind] if isinstance(kind, str) else kind
    for k in kinds:
        if k in ("integer", "number") and isinstance(value, bool):
            continue
        if isinstance(value, _TYPES.get(k, ())):
            return True
    return False


def schema_problems(value: Any, schema: dict[str, Any], where: str = "$") -> list[str]:  # noqa: C901, PLR0912
    """What is wrong with ``value`` against ``schema`` (empty: it is valid)."""
    problems: list[str] = []
    if "anyOf" in schema:
        if all(schema_problems(value, s, where) for s in schema["anyOf"]):
            problems.append(f"{where}: matches none of anyOf")
        return problems
    if "type" in schema and not _type_ok(value, schema["type"]):
        return [f"{where}: expected {schema['type']}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{where}: expected {schema['const']!r}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{where}: {value} < minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(f"{where}: {value} > maximum {schema['maximum']}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            problems.append(f"{where}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(f"{where}: longer than {schema['maxLength']}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        problems += [f"{where}: missing {k!r}" for k in schema.get("required", []) if k not in value]
        for key, item in value.items():
            if key in properties:
                problems += schema_problems(item, properties[key], f"{where}.{key}")
            elif schema.get("additionalProperties") is False:
                problems.append(f"{where}: unexpected {key!r}")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            problems += schema_problems(item, schema["items"], f"{where}[{i}]")
    return problems


def parse_json(output: Any) -> tuple[Any, str | None]:
    """The output as JSON data (a structured answer's fields, or text parsed), or why not."""
    if isinstance(output, BaseModel):
        return output.model_dump(mode="json"), None
    if not isinstance(output, str):
        return output, None
    text = output.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.DOTALL)
    text = fenced[1] if fenced else text
    if too_deep(text) is not None:
        return None, f"the answer nests JSON more than {MAX_NESTING} levels deep"
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, f"the answer is not JSON ({exc})"


__all__ = ["parse_json", "rouge1", "schema_problems", "text_of", "tokens"]
