"""Eval set files: YAML or JSON in, one line per problem out (``file:line: field: what``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .base import EvalSetError

EvalSetT = TypeVar("EvalSetT", bound=BaseModel)

YAML_SUFFIXES = (".yaml", ".yml")


def _yaml() -> Any:
    import importlib

    try:
        return importlib.import_module("yaml")  # (Any: PyYAML ships no type hints)
    except ImportError:
        raise EvalSetError(
            "YAML eval sets need PyYAML: pip install 'loopwright[eval]' (or write the set as JSON)"
        ) from None


def _node_line(root: Any, loc: tuple[int | str, ...]) -> int | None:
    """The line (1-based) of the deepest node of ``loc`` found in a composed YAML tree."""
    if root is None:
        return None
    node, line = root, int(root.start_mark.line) + 1
    for key in loc:
        child = None
        if isinstance(key, str) and type(node).__name__ == "MappingNode":
            child = next((v for k, v in node.value if getattr(k, "value", None) == key), None)
        elif isinstance(key, int) and type(node).__name__ == "SequenceNode" and 0 <= key < len(node.value):
            child = node.value[key]
        if child is None:
            continue  # a name pydantic adds (a union's member): the same node
        node, line = child, int(child.start_mark.line) + 1
    return line


def _field(loc: tuple[int | str, ...], data: Any) -> str:
    out = ""
    for key in loc:
        if isinstance(key, int):
            out += f"[{key}]"
            if isinstance(data, list) and 0 <= key < len(data):
                data = data[key]
                if isinstance(data, dict) and isinstance(data.get("name"), str) and out.endswith("]"):
                    out += f"({data['name']})"
        elif isinstance(data, dict) and key in data:
            out += f".{key}" if out else key
            data = data[key]
        elif key in _KINDS or key in ("function-after", "function-before", "function-wrap"):
            continue  # a union's member, named by pydantic: not a field of the file
        else:  # a missing field
            out += f".{key}" if out else str(key)
    return out or "(the set)"


_KINDS = {"trajectory", "response", "schema", "judge", "run", "function"}


def load_set(cls: type[EvalSetT], path: Path) -> EvalSetT:
    """Read and validate an eval set file (see :meth:`EvalSet.load`)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EvalSetError(f"{path}: cannot read the eval set: {exc.strerror or exc}") from None
    is_yaml = path.suffix.lower() in YAML_SUFFIXES
    root = None
    if is_yaml:
        yaml = _yaml()
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
            raise EvalSetError(f"{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise EvalSetError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
        try:  # JSON is YAML: its lines, for the messages
            loader = _yaml()
            root = loader.compose(text, Loader=loader.SafeLoader)
        except Exception:
            root = None
    if not isinstance(data, dict):
        raise EvalSetError(f"{path}:1: an eval set is a mapping with `cases:` (a list); got {type(data).__name__}")
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors(include_url=False):
            loc = tuple(err["loc"])
            line = _node_line(root, loc)
            where = f"{path}:{line}" if line is not None else str(path)
            lines.append(f"{where}: {_field(loc, data)}: {err['msg']}")
        raise EvalSetError("\n".join(dict.fromkeys(lines))) from None


_TAGS = ("kind", "type")  # discriminators: kept even at their defaults, so the file reads back


def lean(value: Any) -> Any:
    """``value`` as JSON data without the fields at their defaults (discriminators kept)."""
    if isinstance(value, BaseModel):
        out = {}
        for name, info in type(value).model_fields.items():
            item = getattr(value, name)
            if name in _TAGS or info.is_required() or item != info.get_default(call_default_factory=True):
                out[name] = lean(item)
        return out
    if isinstance(value, list | tuple):
        return [lean(v) for v in value]
    if isinstance(value, dict):
        return {k: lean(v) for k, v in value.items()}
    if callable(value):  # a function or class given in code: saved as the name that finds it again
        return f"{getattr(value, '__module__', '?')}:{getattr(value, '__qualname__', repr(value))}"
    return value


def save_set(eval_set: BaseModel, path: Path) -> Path:
    """Write ``eval_set`` as YAML (``.yaml``/``.yml``) or JSON; the path."""
    data = lean(eval_set)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() in YAML_SUFFIXES:
        text = _yaml().safe_dump(data, sort_keys=False, allow_unicode=True, width=110)
    else:
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


__all__ = ["load_set", "save_set"]
