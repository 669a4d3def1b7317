"""Hypothesis strategies for JSON values valid for a tool's JSON schema (the subset pydantic
emits: types, enum/const, anyOf, $ref into $defs, numeric and length bounds, required and
additionalProperties). Written here because hypothesis-jsonschema 0.23.1 does not run on
current hypothesis releases."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), st.text(max_size=12))


def from_schema(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> st.SearchStrategy[Any]:
    """Values valid for ``schema``; unknown constructs fall back to plain JSON scalars."""
    defs = {**(defs or {}), **schema.get("$defs", {})}
    combined = _combinator(schema, defs)
    if combined is not None:
        return combined
    return _typed(schema, defs)


def _combinator(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[Any] | None:
    """The strategy for a ``$ref``, ``const``, ``enum`` or ``anyOf``/``oneOf``/``allOf`` schema;
    None for any other."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return st.deferred(lambda: from_schema(defs[name], defs))
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_schema(s, defs) for s in schema[key]])
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return from_schema(schema["allOf"][0], defs)
    return None


def _typed(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[Any]:
    """The strategy for a schema by its ``type`` (or its ``properties``)."""
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": k}, defs) for k in kind])
    build = _BY_TYPE.get(kind) if isinstance(kind, str) else None
    if build is not None:
        return build(schema, defs)
    if "properties" in schema:
        return _object(schema, defs)
    return JSON_SCALARS


def _string(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[str]:
    return st.text(min_size=schema.get("minLength", 0), max_size=schema.get("maxLength", 12))


def _integer(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[int]:
    low = schema.get("minimum", schema.get("exclusiveMinimum", -1001) + 1)
    high = schema.get("maximum", schema.get("exclusiveMaximum", 1001) - 1)
    return st.integers(low, high)


def _number(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[float]:
    return st.floats(
        min_value=schema.get("minimum", schema.get("exclusiveMinimum", -1e6)),
        max_value=schema.get("maximum", schema.get("exclusiveMaximum", 1e6)),
        exclude_min="exclusiveMinimum" in schema,
        exclude_max="exclusiveMaximum" in schema,
        allow_nan=False,
        allow_infinity=False,
    )


def _boolean(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[bool]:
    return st.booleans()


def _null(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[None]:
    return st.none()


def _array(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[list[Any]]:
    items = from_schema(schema.get("items", {}), defs) if schema.get("items") else JSON_SCALARS
    return st.lists(items, min_size=schema.get("minItems", 0), max_size=schema.get("maxItems", 3))


def _object(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    fixed = {name: from_schema(sub, defs) for name, sub in properties.items() if name in required}
    optional = {name: from_schema(sub, defs) for name, sub in properties.items() if name not in required}
    if not properties and schema.get("additionalProperties") is not False:
        return st.dictionaries(st.text(max_size=5), JSON_SCALARS, max_size=3)
    return st.fixed_dictionaries(fixed, optional=optional)


_BY_TYPE: dict[str, Callable[[dict[str, Any], dict[str, Any]], st.SearchStrategy[Any]]] = {
    "string": _string,
    "integer": _integer,
    "number": _number,
    "boolean": _boolean,
    "null": _null,
    "array": _array,
    "object": _object,
}
