"""Eval set files: YAML or JSON in, one line per problem out (``file:line: field: what``)."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from .base import EvalSetError

EvalSetT = TypeVar("EvalSetT", bound=BaseModel)

YAML_SUFFIXES = (".yaml", ".yml")

MAX_NESTING = 100
"""Lists and mappings an eval set file may nest, counted from its top mapping (a case's value
sits three or four levels down), and a judge's JSON reply: deeper is refused with an
:class:`EvalSetError` naming the file and line (Python's JSON and YAML readers recurse once per
level, and a file nested a thousand deep would end in a raw ``RecursionError``)."""
MAX_ALIAS_NODES = 10_000
"""Nodes the YAML aliases (``*name``) of a set file may stand for in all, each alias counted as
the whole node its anchor names: a "billion laughs" (nine anchors, each nine of the one before:
a few hundred bytes standing for 9**9 items) is refused as it is read, in bounded memory."""


class _Refused(Exception):
    """A set file past a limit: the line (1-based) and what to say."""

    def __init__(self, line: int, what: str) -> None:
        super().__init__(what)
        self.line = line
        self.what = what


_NESTING_FIX = "flatten the data (a deep value can be a JSON string), or split it across cases"


def too_deep(text: str, limit: int = MAX_NESTING) -> int | None:
    """The offset of the first ``[`` or ``{`` of JSON ``text`` that opens a level past
    ``limit`` (brackets inside strings are not counted), or None: a look, nothing parsed."""
    depth = 0
    for found in _JSON_TOKENS.finditer(text):
        token = found[0]
        if token == "[" or token == "{":
            depth += 1
            if depth > limit:
                return found.start()
        elif token == "]" or token == "}":
            depth -= 1
    return None


_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


@functools.cache
def _safe_loader(yaml: Any) -> Any:
    """PyYAML's ``SafeLoader`` that refuses, as it composes, lists and mappings nested past
    :data:`MAX_NESTING` (aliases count as what they stand for), aliases that stand for more
    than :data:`MAX_ALIAS_NODES` nodes in all, and an alias inside its own anchor (a cycle)."""

    class Loader(yaml.SafeLoader):  # type: ignore[misc]  # (PyYAML ships no type hints)
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self._depth = 0
            self._aliased = 0
            self._sizes: dict[int, tuple[int, int]] = {}  # id(node): (its nodes, its levels of lists and mappings)

        def fetch_flow_collection_start(self, token_class: Any) -> None:
            """Refused while scanning (``[[[...`` on one line would cost the scanner seconds)."""
            if self.flow_level >= MAX_NESTING:
                raise _Refused(int(self.line) + 1, f"lists and mappings nested {_deeper}; {_NESTING_FIX}")
            super().fetch_flow_collection_start(token_class)

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            line = int(event.start_mark.line) + 1
            if isinstance(event, yaml.AliasEvent):
                _count_alias(self, self.anchors.get(event.anchor), event.anchor, line)
                return super().compose_node(parent, index)
            opens = isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent)
            self._depth += opens
            if self._depth > MAX_NESTING:
                raise _Refused(line, f"lists and mappings nested {_deeper}; {_NESTING_FIX}")
            try:
                node = super().compose_node(parent, index)
            finally:
                self._depth -= opens
            kids = node.value if opens else ()
            if isinstance(node, yaml.MappingNode):
                kids = [item for pair in kids for item in pair]
            sizes = [self._sizes[id(kid)] for kid in kids]
            self._sizes[id(node)] = (1 + sum(s for s, _ in sizes), opens + max((h for _, h in sizes), default=0))
            return node

    return Loader


_deeper = f"more than {MAX_NESTING} levels deep (loopwright.eval.MAX_NESTING)"


def _count_alias(loader: Any, node: Any, anchor: str, line: int) -> None:
    """An alias of ``node`` (None: an undefined one, PyYAML's to refuse) met at ``line`` by
    :func:`_safe_loader`'s ``loader``: counted, or refused."""
    if node is None:
        return
    if id(node) not in loader._sizes:
        raise _Refused(line, f"the alias *{anchor} is inside its own anchor (a cycle)")
    size, height = loader._sizes[id(node)]
    loader._aliased += size
    if loader._aliased > MAX_ALIAS_NODES:
        raise _Refused(
            line,
            f"the YAML aliases stand for more than {MAX_ALIAS_NODES:,} nodes in all "
            '(loopwright.eval.MAX_ALIAS_NODES; a "billion laughs"?); write the data out, or repeat less of it',
        )
    if loader._depth + height > MAX_NESTING:
        raise _Refused(line, f"lists and mappings nested {_deeper}, through aliases; {_NESTING_FIX}")


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


def _parse(path: Path, text: str) -> tuple[Any, Any]:
    """The file's composed YAML tree (for the lines of messages; None when there is none) and
    its data; an :class:`EvalSetError` at ``file:line`` for text that is not valid or is past a limit."""
    if path.suffix.lower() in YAML_SUFFIXES:
        yaml = _yaml()
        try:
            return _read_yaml(yaml, text)
        except _Refused as exc:
            raise EvalSetError(f"{path}:{exc.line}: {exc.what}") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
            raise EvalSetError(f"{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    deep = too_deep(text)
    if deep is not None:
        line = text.count("\n", 0, deep) + 1
        raise EvalSetError(f"{path}:{line}: lists and mappings nested {_deeper}; {_NESTING_FIX}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise EvalSetError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    try:  # JSON is YAML: its lines, for the messages
        return _read_yaml(_yaml(), text)[0], data
    except Exception:
        return None, data


def load_set(cls: type[EvalSetT], path: Path) -> EvalSetT:
    """Read and validate an eval set file (see :meth:`EvalSet.load`)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EvalSetError(f"{path}: cannot read the eval set: {exc.strerror or exc}") from None
    root, data = _parse(path, text)
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


def _read_yaml(yaml: Any, text: str) -> tuple[Any, Any]:
    """The composed tree of YAML ``text`` (for the lines of messages) and its data, read once by
    the limited loader (:func:`_safe_loader`)."""
    loader = _safe_loader(yaml)(text)
    try:
        root = loader.get_single_node()
        return root, (loader.construct_document(root) if root is not None else None)
    finally:
        loader.dispose()


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


__all__ = ["MAX_ALIAS_NODES", "MAX_NESTING", "load_set", "save_set", "too_deep"]
