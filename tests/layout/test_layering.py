"""loopwright's folders are floors: each imports only the floors below it, no import cycles, no module
forwards to another, stages import only lower layers, the plugin loads no engine."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import ROOT

PACKAGES = {"loopwright": ROOT / "engine", "loopwright.states": ROOT / "states"}
STAGES = {"act", "decide", "postprocess", "preprocess", "reason", "salvage", "start"}

FLOORS = [
    "data",  # plain values: events and their parts, limits, run state, result, errors, stages
    "stores",  # storage only: what a store keeps and the SQLite and PostgreSQL stores
    "models",  # the model protocol, the scripted model, the Anthropic adapter
    "table",  # the transition table: machine, rows, guards, budgets, rules
    "runtime",  # what a stage runs with: context, event log, agent, tools, model calls, nesting, observers
    "states",  # the stages (the top-level states/ folder, installed as loopwright.states)
    "features",  # one module per composed feature
    "machines",  # an agent's whole machine: extend, verify, diagram
    "extend",  # the public skin for extension writers (rows, guards, budgets, extend, compose)
    "durable",  # ownership, checkpoints, resume, the checks a saved state passes
    "loop",  # the Runner and Run that drive a run (the public stepping protocol), agents as tools
    "workflows",  # sequential, parallel, loop and map agents: nested, verified machines of child runs
    "integrations",  # DBOS, OpenTelemetry
    "testing",  # the pytest plugin, hypothesis strategies, invariants
    "eval",  # eval sets, evaluators, tool mocks, evaluate() and its report
    "demo",  # the demo agents `loopwright demo` runs (public: examples and docs use them)
    "serve",  # the ASGI app: runs behind HTTP, SSE, approvals, AG-UI, the dev UI's files
    "cli",  # the loopwright command and what it runs
]
"""The floors, lowest first: a module imports only modules of its own floor or of floors below."""

RAISED = {
    "loopwright.integrations.a2a": "serve",  # serves agents over A2A through serve's Service (docs/guide/a2a.md)
}
"""Packages that stand on a higher floor than their folder's (the floor named), each with why."""

UPWARD_FOR_TYPES = {
    ("loopwright.table.machine", "loopwright.runtime.context"): "a row's handler takes the run's context",
}
"""Imports of a higher floor allowed under ``if TYPE_CHECKING:`` only (an annotation, no import at
run time), each with why."""


def module_files() -> dict[str, Path]:
    """Every module of loopwright by its dotted name (``loopwright.x``, ``loopwright.states.x``)."""
    found: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


MODULES = module_files()


def _package_of(name: str) -> str:
    """The package a module's relative imports are relative to."""
    return name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = _package_of(module)
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    return f"{base}.{node.module}" if node.module else base


def _ranges(tree: ast.Module) -> tuple[list[range], list[range]]:
    """The line ranges of ``if TYPE_CHECKING:`` bodies and of function bodies."""
    typing_only, functions = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.append(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            functions.append(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return typing_only, functions


def imports_of(module: str) -> Iterator[tuple[str, str]]:
    """The loopwright modules ``module`` imports anywhere in it, with where: ``"top"``,
    ``"function"`` or ``"TYPE_CHECKING"``. ``from package import name`` counts as importing
    the submodule ``package.name`` when there is one, else the package."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    typing_only, functions = _ranges(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        how = "top"
        if any(node.lineno in r for r in functions):
            how = "function"
        if any(node.lineno in r for r in typing_only):
            how = "TYPE_CHECKING"
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            target = _absolute(module, node)
            names = [f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names]
        for name in names:
            for known in _known(name):
                yield known, how


def imported(module: str) -> set[str]:
    return {target for target, _ in imports_of(module)}


def _known(name: str) -> Iterator[str]:
    """``name`` or its nearest enclosing loopwright module (``import loopwright.x.y`` of an
    attribute), if it is one of ours."""
    while name:
        if name in MODULES:
            yield name
            return
        name = name.rpartition(".")[0]


def import_graph() -> dict[str, set[str]]:
    return {m: {t for t in imported(m) if t != m} for m in MODULES}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the graph's strongly connected components (each sorted)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            at = stack.index(node)
            components.append(sorted(stack[at:]))
            del stack[at:]

    for root in sorted(graph):
        if root not in index:
            visit(root)
    return components


def a_cycle(graph: dict[str, set[str]], members: list[str]) -> list[str]:
    """One concrete cycle inside a strongly connected component, for the failure message."""
    inside = set(members)
    start = members[0]
    path, seen = [start], {start}
    node = start
    while True:
        nxt = sorted(graph[node] & inside)
        back = start if start in nxt else None
        if back is not None and len(path) > 1:
            return [*path, start]
        fresh = [n for n in nxt if n not in seen]
        if not fresh:
            loop_at = next(n for n in nxt if n in seen)
            return [*path[path.index(loop_at) :], loop_at]
        node = fresh[0]
        path.append(node)
        seen.add(node)


# ------------------------------------------------------------------ the graph helpers themselves


def test_the_walk_finds_every_module_and_the_edges_it_should() -> None:
    assert {"loopwright", "loopwright.table.machine", "loopwright.features", "loopwright.features.waiting"} <= set(
        MODULES
    )
    assert {f"loopwright.states.{s}" for s in STAGES} | {"loopwright.states"} <= set(MODULES)
    graph = import_graph()
    assert "loopwright.table.guards" in graph["loopwright.machines.verify"]  # from ..table import guards as _guards
    assert "loopwright.features" in graph["loopwright.loop.runner"]  # from ..features import machine_for
    assert "loopwright.states" in graph["loopwright.loop.runner"]  # from loopwright.states import HANDLERS
    assert "loopwright.runtime.context" in graph["loopwright.table.machine"]  # under if TYPE_CHECKING:
    assert "loopwright.data.limits" in graph["loopwright.table.machine"]  # inside a function
    assert "loopwright.loop.runner" in graph["loopwright"]  # the package's own re-exports (TYPE_CHECKING)


def test_strongly_connected_finds_cycles_and_only_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "pkg": {"pkg.x"}, "pkg.x": set()}
    parts = [c for c in strongly_connected(graph) if len(c) > 1]
    assert parts == [["a", "b", "c"]]
    assert a_cycle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def floor_of(module: str) -> int | None:
    """The floor a module stands on (its index in :data:`FLOORS`); ``None`` for the package itself
    (``loopwright``: it re-exports every floor)."""
    if module == "loopwright":
        return None
    if module == "loopwright.__main__":
        return FLOORS.index("cli")
    for package, floor in RAISED.items():
        if module == package or module.startswith(package + "."):
            return FLOORS.index(floor)
    return FLOORS.index(module.split(".")[1])


# ------------------------------------------------------------------ the rules


def test_every_module_stands_on_a_floor() -> None:
    strays = [m for m in MODULES if m not in {"loopwright", "loopwright.__main__"} and m.split(".")[1] not in FLOORS]
    assert not strays, f"{strays}: put each in the folder of its floor (FLOORS in {Path(__file__).name})"
    folders = {p.name for p in PACKAGES["loopwright"].iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders | {"states"} == set(FLOORS)


def test_each_floor_imports_only_floors_below_it() -> None:
    wrong = []
    for module in MODULES:
        floor = floor_of(module)
        if floor is None:
            continue
        for target, how in sorted(set(imports_of(module))):
            if target == module:
                continue
            above = floor_of(target)
            if above is None:
                wrong.append(f"{module} imports the package loopwright itself ({how})")
            elif above > floor and not (how == "TYPE_CHECKING" and (module, target) in UPWARD_FOR_TYPES):
                wrong.append(
                    f"{module} ({FLOORS[floor]}) imports {target} ({FLOORS[above]}, a higher floor; {how}):"
                    " move the module up, or pass what it needs down"
                )
    assert not wrong, "\n".join(wrong)


def test_the_allowed_type_imports_are_still_needed() -> None:
    for (module, target), why in UPWARD_FOR_TYPES.items():
        assert (target, "TYPE_CHECKING") in set(imports_of(module)), f"{module} no longer needs {target} ({why})"


def test_no_module_forwards_to_another() -> None:
    """No alias modules: every module is code of its own, and the package's top level holds only
    ``__init__``, ``__main__`` and folders (the project has no users of old paths to keep)."""
    aliases = [m for m, path in MODULES.items() if "sys.modules[__name__] =" in path.read_text()]
    assert not aliases, f"{aliases} replace themselves in sys.modules: delete them and import the real module"
    files = sorted(p.name for p in PACKAGES["loopwright"].glob("*.py"))
    assert files == ["__init__.py", "__main__.py"], f"{files}: put each module in the folder of its floor"


def test_pickles_name_public_homes_and_load_in_a_fresh_interpreter() -> None:
    code = (
        "import pickle\n"
        "from loopwright import ToolCall, Limits\n"
        "from loopwright.extend import Row\n"
        "values = [ToolCall(name='t', args={}), Limits(max_iterations=3), Row('decide', 'done')]\n"
        "data = [pickle.dumps(v) for v in values]\n"
        "assert b'loopwright.data' not in b''.join(data) and b'loopwright.table' not in b''.join(data)\n"
        "assert [pickle.loads(d) for d in data] == values\n"
        "print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_no_import_cycles() -> None:
    """A package ``__init__`` that imports its own submodules is no cycle by itself: only a
    submodule importing its package (or anything that leads back) closes one."""
    graph = import_graph()
    cycles = [c for c in strongly_connected(graph) if len(c) > 1]
    lines = []
    for component in cycles:
        path = a_cycle(graph, component)
        lines.append(f"  {' -> '.join(path)}  (component: {', '.join(component)})")
        for source in component:
            for target, how in sorted(set(imports_of(source))):
                if target in component and target != source:
                    lines.append(f"      {source} imports {target} ({how})")
    report = "\n".join(lines)
    assert not cycles, f"{len(cycles)} import cycle(s) among loopwright's modules:\n{report}"


def test_the_machine_does_not_import_the_agent() -> None:
    assert "loopwright.runtime.agent" not in import_graph()["loopwright.table.machine"]


def test_importing_the_machine_loads_no_agent() -> None:
    code = "import sys, loopwright.table.machine; print('loopwright.runtime.agent' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_the_result_does_not_import_the_diagram() -> None:
    assert "loopwright.machines.diagram" not in import_graph()["loopwright.data.result"]


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_a_stage_imports_no_other_stage(stage: str) -> None:
    module = f"loopwright.states.{stage}"
    wrong = sorted(t for t in import_graph()[module] if t.startswith("loopwright.states"))
    assert not wrong, f"{module} imports {wrong}: stages import only lower layers of loopwright"
    assert all(t.startswith("loopwright.") for t in import_graph()[module])


def test_collecting_the_suite_works() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:randomly"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,  # collection imports every test module; a loaded 2-core machine needs minutes
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_the_pytest_plugin_imports_no_engine() -> None:
    code = "import loopwright.testing.plugin; import sys; print('pydantic' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


ROOT_FILES = {".gitignore", "CHANGELOG.md", "LICENSE", "README.md", "mkdocs.yml", "pyproject.toml"}
ROOT_FOLDERS = {".ci", "bench", "diagrams", "docs", "engine", "examples", "states", "tests"}


def test_the_repository_root_holds_the_layout_and_nothing_else() -> None:
    """The layout is fixed (engine/, states/, tests/, diagrams/, ...): a script a docs example or
    a tool wrote at the root and a `git add -A` picked up fails here, by name."""
    import shutil
    import subprocess

    root = ROOT
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    tops = {path.split("/", 1)[0] for path in tracked}
    strays = sorted(tops - ROOT_FILES - ROOT_FOLDERS)
    assert not strays, f"{strays} at the repository root: move them into the layout's folders (or remove them)"


MAX_LINES = 800
"""A guard, not a rule: one concern per module, and a module may be long if it is one concern; past
this, look for the second job inside it (never split a class into a base and a mixin for size)."""

OVER_MAX_LINES: dict[str, str] = {}
"""Modules allowed past :data:`MAX_LINES` for now, each with why (remove an entry once it is split)."""


def test_no_module_is_over_the_line_limit() -> None:
    """Every module of engine/ and states/ is at most MAX_LINES lines, but those allowed (with why)."""
    lengths = {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for folder in PACKAGES.values()
        for path in sorted(folder.rglob("*.py"))
    }
    offenders = sorted(
        f"{name} ({n} lines)" for name, n in lengths.items() if n > MAX_LINES and name not in OVER_MAX_LINES
    )
    assert not offenders, (
        f"over {MAX_LINES} lines: {', '.join(offenders)}; split each by job (one module per job, named for it, "
        f"with a module docstring), keeping its public import path working by re-export"
    )


def test_each_module_allowed_over_the_limit_still_is() -> None:
    """An entry of OVER_MAX_LINES whose module was split (or removed) goes, so the list stays honest."""
    gone = sorted(
        name
        for name in OVER_MAX_LINES
        if not (ROOT / name).exists() or len((ROOT / name).read_text(encoding="utf-8").splitlines()) <= MAX_LINES
    )
    assert not gone, f"{', '.join(gone)}: no longer over {MAX_LINES} lines; remove from OVER_MAX_LINES"


# ------------------------------------------------------------------ no private names across modules

PRIVATE_IMPORTS: dict[tuple[str, str, str], str] = {}
"""``(importer, module, name)``: a ``_private`` name one loopwright module may take from another,
each with why (none so far: give the module a public name for it, or merge the two if they are one
concern)."""


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_names_taken(module: str) -> Iterator[tuple[str, str, int]]:
    """The ``_private`` names ``module`` takes from another loopwright module, with the line:
    ``from .x import _name`` (a private submodule, ``from . import _x``, is a module, not a
    name), and ``x._name`` where ``x`` is a loopwright module it imported
    (``from ..runtime import nesting`` then ``nesting._UPS``; ``import loopwright.x as x``)."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    bound, taken = _modules_bound(module, tree)
    yield from taken
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            dotted = ast.unparse(node.value)
            target = bound.get(dotted, dotted if dotted in MODULES else "")
            if target and target != module:
                yield target, node.attr, node.lineno


def _modules_bound(module: str, tree: ast.Module) -> tuple[dict[str, str], list[tuple[str, str, int]]]:
    """The local names ``module``'s imports bind to loopwright modules (name -> module), and the
    private names it imports from another loopwright module (module, name, line)."""
    bound: dict[str, str] = {}
    taken: list[tuple[str, str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = _absolute(module, node)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in MODULES:
                    bound[alias.asname or alias.name] = sub
                elif target in MODULES and target != module and _private(alias.name):
                    taken.append((target, alias.name, node.lineno))
        elif isinstance(node, ast.Import):
            bound.update({a.asname or a.name: a.name for a in node.names if a.name in MODULES})
    return bound, taken


def test_no_module_takes_a_private_name_of_another() -> None:
    """A module's ``_private`` names are its own: what another module needs of it is a public
    name of it (an interface), or the two are one concern and one module (never a base and a
    mixin, nor a module that reaches into another's internals)."""
    found = [
        (module, target, name, line)
        for module in MODULES
        for target, name, line in private_names_taken(module)
        if (module, target, name) not in PRIVATE_IMPORTS
    ]
    wrong = [f"{MODULES[m].relative_to(ROOT)}:{line} takes {t}.{n}" for m, t, n, line in found]
    assert not wrong, (
        "private names taken across modules:\n"
        + "\n".join(wrong)
        + "\ngive the module a public name for it, or merge the two if they are one concern"
        " (or list it, with why, in PRIVATE_IMPORTS)"
    )
    taken = {(m, t, n) for m in MODULES for t, n, _ in private_names_taken(m)}
    stale = sorted(k for k in PRIVATE_IMPORTS if k not in taken)
    assert not stale, f"{stale}: no longer taken; remove from PRIVATE_IMPORTS"


def test_the_private_name_walk_finds_what_it_should(tmp_path: Path) -> None:
    """The walk itself, on a module written for it: a private name imported, one reached through
    an imported module, a private submodule (allowed) and its own names (allowed)."""
    source = (
        "from ..runtime import nesting\n"
        "from ..runtime.nesting import _UPS, adopt\n"
        "from .. import runtime as rt\n"
        "from ..runtime import _core\n"
        "_mine = 1\n"
        "x = nesting._PARENT, _UPS, _mine, nesting.adopt, rt._hidden, _core.kernel\n"
    )
    path = tmp_path / "probe.py"
    path.write_text(source)
    MODULES["loopwright.loop.probe"] = MODULES["loopwright.runtime._core"] = path
    try:
        taken = sorted((t, n) for t, n, _ in private_names_taken("loopwright.loop.probe"))
    finally:
        del MODULES["loopwright.loop.probe"], MODULES["loopwright.runtime._core"]
    assert taken == [
        ("loopwright.runtime", "_hidden"),
        ("loopwright.runtime.nesting", "_PARENT"),
        ("loopwright.runtime.nesting", "_UPS"),
    ]
