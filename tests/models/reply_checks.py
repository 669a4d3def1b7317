"""Comparing replies field by field and type by type (``3`` is not ``3.0`` nor ``True`` here, a
``nan`` is itself), fields given included, and rebuilding a reply through the validated
constructors (what the adapters made before the fast constructors)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def typed(value: Any) -> Any:
    """``value`` with every type and every model's fields given spelled out."""
    if isinstance(value, BaseModel):
        fields = value.__dict__
        return (type(value).__name__, sorted(value.model_fields_set), [(k, typed(fields[k])) for k in sorted(fields)])
    if isinstance(value, dict):
        return (type(value).__name__, [(typed(k), typed(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [typed(v) for v in value])
    if isinstance(value, float):
        return (type(value).__name__, repr(value))  # (a nan is itself)
    return (type(value).__name__, value)


def assert_same(made: BaseModel, validated: BaseModel) -> None:
    """``made`` is ``validated``: the same types, values and fields given, the same dumps."""
    assert typed(made) == typed(validated)
    assert made.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True) or typed(
        made.model_dump(exclude_unset=True)
    ) == typed(validated.model_dump(exclude_unset=True))  # (a nan is not == itself)
    assert typed(made.model_dump()) == typed(validated.model_dump())
    assert _json(made) == _json(validated)


def _json(model: BaseModel) -> str:
    try:
        return model.model_dump_json()
    except ValueError as exc:  # (a lone surrogate: UTF-8 cannot hold it)
        return f"{type(exc).__name__}: {exc}"


def revalidated(value: Any) -> Any:
    """``value`` built again, every model through its validated constructor, given the fields
    ``value`` was given."""
    if isinstance(value, BaseModel):
        return type(value)(**{name: revalidated(value.__dict__[name]) for name in value.model_fields_set})
    if type(value) is tuple:
        return tuple(revalidated(v) for v in value)
    return value
