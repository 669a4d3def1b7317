"""An extension's changes to a table's rows: remove, redirect, require, rows before a named row,
rows before a state's fallback (what :func:`~loopwright.table.machine.extend_machine` applies)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from ..data.errors import MachineError
from .rows import Guard, Row


class RowChanges(Protocol):
    """What :func:`apply_changes` reads of an :class:`~loopwright.table.machine.Extension`."""

    @property
    def name(self) -> str: ...
    @property
    def rows(self) -> Sequence[Row]: ...
    @property
    def rows_before(self) -> Mapping[tuple[str, str], Sequence[Row]]: ...
    @property
    def redirect(self) -> Mapping[tuple[str, str], str]: ...
    @property
    def require(self) -> Mapping[tuple[str, str], Sequence[Guard]]: ...
    @property
    def remove(self) -> Sequence[tuple[str, str]]: ...


def _rows_out(table: Sequence[Row], source: str) -> str:
    out = [str(r) for r in table if r.source == source]
    return f"the rows out of {source!r} are: {'; '.join(out)}" if out else f"no row leaves {source!r}"


def _matching(table: list[Row], key: tuple[str, str], ext: RowChanges, op: str) -> list[int]:
    """Where the rows ``key`` = (source, dest) are; MachineError naming ``op`` (how the
    extension wrote it) when there is none."""
    hits = [i for i, r in enumerate(table) if (r.source, r.dest) == key]
    if not hits:
        raise MachineError(f"extension {ext.name!r}: {op} matches no row; {_rows_out(table, key[0])}")
    return hits


def _insert_before_fallback(table: list[Row], row: Row, ext: RowChanges) -> None:
    out = [i for i, r in enumerate(table) if r.source == row.source]
    if not out:
        table.append(row)
        return
    last = out[-1]
    if table[last].is_fallback and row.is_fallback:
        raise MachineError(
            f"extension {ext.name!r}: row {row} would be a second fallback of {row.source!r}, which already ends in "
            f"{table[last]}; remove=[({row.source!r}, {table[last].dest!r})] first to replace it"
        )
    table.insert(last if table[last].is_fallback else last + 1, row)


def apply_changes(table: list[Row], ext: RowChanges) -> list[Row]:
    """``table`` with ``ext``'s row changes applied (remove, redirect, require, rows_before, rows)."""
    for key in ext.remove:
        hits = set(_matching(table, key, ext, f"remove={key}"))
        table = [r for i, r in enumerate(table) if i not in hits]
    for key, new_dest in ext.redirect.items():
        for i in _matching(table, key, ext, f"redirect={{{key}: {new_dest!r}}}"):
            r = table[i]
            table[i] = Row(r.source, new_dest, r.guards, r.bounded_by, None, r.records_limit, ext.name)
    for key, guards in ext.require.items():
        for i in _matching(table, key, ext, f"require={{{key}: ...}}"):
            r = table[i]
            table[i] = Row(r.source, r.dest, (*guards, *r.guards), r.bounded_by, r.outcome, r.records_limit, r.origin)
    for key, rows in ext.rows_before.items():
        at = _matching(table, key, ext, f"rows_before={{{key}: ...}}")[0]
        table[at:at] = [_own(r, ext) for r in rows]
    for row in ext.rows:
        _insert_before_fallback(table, _own(row, ext), ext)
    return table


def _own(row: Row, ext: RowChanges) -> Row:
    return Row(row.source, row.dest, row.guards, row.bounded_by, row.outcome, row.records_limit, ext.name)
