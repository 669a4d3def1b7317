"""An extension's changes to a table's rows: remove, redirect, require, rows before a named row,
rows before a state's fallback (what :func:`~loopwright.table.machine.extend_machine` applies).

Two features may insert states on one row (``redirect={(start, preprocess): mine}`` of each,
memory's ``recall`` and the Planner's ``plan``). A row an earlier feature redirected is still
found by its old name: the feature composed **later wraps** those composed before it, as the
outer layer of middleware does. Its redirect takes the row into the earlier insertion
(``start -> plan`` becomes ``start -> recall``), and its own rows from the states it inserted
into the row's old destination go to the earlier insertion instead (``recall -> preprocess``
becomes ``recall -> plan``): ``start -> recall -> plan -> preprocess``. ``require`` and
``rows_before`` of a moved row apply to the row into the latest insertion. So any number of
features compose on one row, the last composed entered first (the built-ins in their order,
then the user's own: an agent's input guards run before its planner's model call)."""

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
    @property
    def states(self) -> Mapping[str, object]: ...


def _rows_out(table: Sequence[Row], source: str) -> str:
    out = [str(r) for r in table if r.source == source]
    return f"the rows out of {source!r} are: {'; '.join(out)}" if out else f"no row leaves {source!r}"


def _matching(
    table: list[Row], key: tuple[str, str], ext: RowChanges, op: str, earlier: Sequence[RowChanges] = ()
) -> list[int]:
    """Where the rows ``key`` = (source, dest) are (or, if an ``earlier`` feature redirected
    them, the rows into its insertion: :func:`_moved`); MachineError naming ``op`` (how the
    extension wrote it) when there is none."""
    hits = [i for i, r in enumerate(table) if (r.source, r.dest) == key]
    if not hits:
        hits = _moved(table, key, earlier)[0]
    if not hits:
        raise MachineError(f"extension {ext.name!r}: {op} matches no row; {_rows_out(table, key[0])}")
    return hits


def _moved(table: list[Row], key: tuple[str, str], earlier: Sequence[RowChanges]) -> tuple[list[int], str | None]:
    """The rows ``key`` became when the latest of ``earlier`` that redirected it did (they
    enter its state and are its own), and that state; ``([], None)`` if none redirected it."""
    for e in reversed(earlier):
        into = e.redirect.get(key)
        if into is not None:
            return [i for i, r in enumerate(table) if (r.source, r.dest) == (key[0], into) and r.origin == e.name], into
    return [], None


def _exits(ext: RowChanges, entered: str, dest: str) -> set[int]:
    """The indexes in ``ext.rows`` of its rows into ``dest`` from the states it inserted that a
    run reaches from ``entered`` (through the extension's own states)."""
    region, todo = {entered}, [entered]
    while todo:
        at = todo.pop()
        for r in ext.rows:
            if r.source == at and r.dest in ext.states and r.dest not in region:
                region.add(r.dest)
                todo.append(r.dest)
    return {i for i, r in enumerate(ext.rows) if r.source in region and r.dest == dest}


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


def apply_changes(table: list[Row], ext: RowChanges, earlier: Sequence[RowChanges] = ()) -> list[Row]:
    """``table`` with ``ext``'s row changes applied (remove, redirect, require, rows_before, rows);
    ``earlier``: the features composed before it (a row one of them redirected is found by its
    old name: see the module docstring)."""
    for key in ext.remove:
        hits = set(_matching(table, key, ext, f"remove={key}"))
        table = [r for i, r in enumerate(table) if i not in hits]
    wrapped = _redirect(table, ext, earlier)
    for key, guards in ext.require.items():
        for i in _matching(table, key, ext, f"require={{{key}: ...}}", earlier):
            r = table[i]
            table[i] = Row(r.source, r.dest, (*guards, *r.guards), r.bounded_by, r.outcome, r.records_limit, r.origin)
    for key, rows in ext.rows_before.items():
        at = _matching(table, key, ext, f"rows_before={{{key}: ...}}", earlier)[0]
        table[at:at] = [_own(r, ext) for r in rows]
    for n, row in enumerate(ext.rows):
        into = wrapped.get(n)
        if into is not None:
            row = Row(row.source, into, row.guards, row.bounded_by, None, row.records_limit)
        _insert_before_fallback(table, _own(row, ext), ext)
    return table


def _redirect(table: list[Row], ext: RowChanges, earlier: Sequence[RowChanges]) -> dict[int, str]:
    """Apply ``ext.redirect`` to ``table`` (in place); the indexes in ``ext.rows`` of its rows
    that enter an earlier feature's insertion instead of the moved row's old destination."""
    wrapped: dict[int, str] = {}
    for key, new_dest in ext.redirect.items():
        hits = [i for i, r in enumerate(table) if (r.source, r.dest) == key]
        if not hits:
            hits, inner = _moved(table, key, earlier)
            if inner is not None:
                wrapped.update(dict.fromkeys(_exits(ext, new_dest, key[1]), inner))
        for i in hits or _matching(table, key, ext, f"redirect={{{key}: {new_dest!r}}}"):
            r = table[i]
            table[i] = Row(r.source, new_dest, r.guards, r.bounded_by, None, r.records_limit, ext.name)
    return wrapped


def _own(row: Row, ext: RowChanges) -> Row:
    return Row(row.source, row.dest, row.guards, row.bounded_by, row.outcome, row.records_limit, ext.name)
