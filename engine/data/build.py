"""Building the engine's own values fast: :func:`trusted` makes a pydantic model from fields the
engine already typed, without validation, through BaseModel's own slots (pinned by
tests/user_path/test_internals_pinned.py); shared immutable fields-sets; the process's tool-call ids.
"""

from __future__ import annotations

import itertools
import os
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

FROZEN = ConfigDict(frozen=True, extra="forbid")
_PROCESS_PREFIX = os.urandom(4).hex()
_call_counter = itertools.count(1)


def new_call_id() -> str:
    """A tool-call id unique in this process and, by its random prefix, across processes."""
    return f"call_{_PROCESS_PREFIX}{next(_call_counter):06x}"


M = TypeVar("M", bound=BaseModel)
new_object = object.__new__


class AllFieldsSet(set[str]):
    """A ``__pydantic_fields_set__`` shared by many instances: every trusted instance of one
    class (all its fields are set), or kept replies with the same fields given (:func:`kept`).

    A ``set``, as pydantic's serializer requires of a fields-set (``exclude_unset``), that cannot
    be changed in place, so sharing is safe: adding a name already in it changes nothing (what
    pydantic's own ``add`` would do); any other change raises ``TypeError``. A copy (what
    ``model_copy`` takes before it adds the updated names) is a fresh, plain set."""

    __slots__ = ()

    def add(self, name: str) -> None:
        if name not in self:
            _unchangeable()

    def __copy__(self) -> set[str]:
        return set(self)

    def __deepcopy__(self, memo: Any) -> set[str]:
        return set(self)

    def __reduce__(self) -> tuple[Any, ...]:  # (pickled as the plain set it stands for)
        return (set, (list(self),))

    def __hash__(self) -> int:  # type: ignore[override]  # (shared and unchangeable: hashed by identity)
        return id(self)


def _unchangeable(*_: Any, **__: Any) -> Any:
    raise TypeError(
        "this fields-set is shared by many of the engine's objects and cannot be changed in place; "
        "copy it (copy.copy or set(...)) and set the copy"
    )


for _name in (
    "discard", "remove", "pop", "clear", "update", "difference_update", "intersection_update",
    "symmetric_difference_update", "__ior__", "__iand__", "__isub__", "__ixor__",
):  # fmt: skip
    setattr(AllFieldsSet, _name, _unchangeable)


_FIELDS_SET: dict[type[BaseModel], AllFieldsSet] = {}
_SHARED_SETS: dict[frozenset[str], AllFieldsSet] = {}


def all_fields(cls: type[BaseModel]) -> AllFieldsSet:
    fields_set = _FIELDS_SET.get(cls)
    if fields_set is None:
        fields_set = _FIELDS_SET[cls] = AllFieldsSet(cls.model_fields)
    return fields_set


def trusted(cls: type[M], **fields: Any) -> M:
    """Build ``cls`` from fields the engine already typed, without validation.

    Every field must be given (defaults are not filled in). This is ~3x cheaper than
    validating and is used on the hot path only for values the engine itself creates.
    """
    obj = new_object(cls)
    set_dict(obj, fields)
    set_fields_set(obj, _FIELDS_SET.get(cls) or all_fields(cls))
    set_extra(obj, None)
    set_private(obj, None)
    return obj


def share_fields_set(obj: BaseModel) -> None:
    own = obj.__pydantic_fields_set__
    if type(own) is set:
        key = frozenset(own)
        shared = _SHARED_SETS.get(key)
        if shared is None:
            shared = _SHARED_SETS[key] = AllFieldsSet(key)
        set_fields_set(obj, shared)


# BaseModel's own slots, set through their descriptors (a quarter cheaper than object.__setattr__)
set_dict = BaseModel.__dict__["__dict__"].__set__
set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
set_private = BaseModel.__dict__["__pydantic_private__"].__set__
