"""Shared test set-up: a full run of the suite fails if any row of any built-in machine (the
core, each feature, both) never fired on that machine (the loopwright pytest plugin records the
rows taken, per machine; under pytest-xdist each worker sends its own and a row counts if any
worker took it); the markers of tests that start servers, browsers or run long
(``pytest -m "not postgres and not dbos and not browser and not slow"`` is the fast part); and the
fixtures tests of more than one folder use. A folder's own fixtures are in its ``conftest.py``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.fake_claude import FakeClaude
from tests.fake_openai import FakeOpenAI

pytest_plugins = ["pytester", "tests.pg_fixture"]

settings.register_profile("loopwright", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("loopwright")
"""Properties are judged by what they find, not by how fast a loaded machine draws or runs an
example: no per-example deadline and no "input generation is slow" health check (CI's 2 cores
run the suite on ``-n auto`` beside real servers). A test's own ``@settings`` still applies."""

MARK_BY_FIXTURE = {"pg_dsn": "postgres", "pg_url": "postgres", "browser": "browser"}
"""A test that takes one of these fixtures (a PostgreSQL server, Chromium) gets the marker."""

SLOW = {
    "tests/layout/test_layering.py::test_collecting_the_suite_works": "collects the whole suite in a child pytest",
    "tests/models/anthropic/test_anthropic_clients.py::test_own_clients_are_closed_when_their_loop_ends_200_run_sync_calls": "200 runs",
    "tests/models/anthropic/test_anthropic_model.py::test_demo_on_claude_against_the_fake_server": "the demo CLI in subprocesses",
    "tests/stores/test_store_property.py::test_crash_resume_equivalence_on_sqlite": "a long crash-and-resume property",
    "tests/testing/test_testing_kit.py::test_hypothesis_finds_and_shrinks_a_seeded_bug": "hypothesis shrinking in a child run",
    "tests/testing/test_testing_kit.py::test_coverage_report_is_exact": "a child pytest run",
    "tests/table/test_bounds.py::test_any_verified_extension_ends_within_its_caps": "a long property over generated machines",
    "tests/table/test_machine.py::test_the_compiled_choice_is_the_tables_rows_walked_in_order": "every state, every machine",
    "tests/stores/test_store_kill.py::test_kill_9_at_random_points_then_resume_in_new_processes": "kill -9, resume",
    "tests/layout/test_layering.py::test_a_stage_imports_no_other_stage": "a fresh interpreter per stage",
    "tests/user_path/test_public_api.py::test_the_anthropic_sdk_is_imported_only_when_used": "imports the SDK in a child",
    "tests/cli/test_run_cli.py::test_a_run_kept_in_a_store_waits_and_is_resumed_from_it_by_id": "CLI subprocesses",
    "tests/cli/test_run_cli.py::test_bad_arguments_say_what_to_do": "CLI subprocesses",
    "tests/cli/test_run_cli.py::test_json_lines_then_a_saved_wait_then_resume": "CLI subprocesses",
    "tests/features/test_feature_combinations.py::test_any_script_on_any_combination_ends_within_every_budget": "a property",
    "tests/testing/test_properties.py::test_every_run_ends_within_its_bounds": "a property",
    "tests/models/anthropic/test_anthropic_mapping.py::test_any_history_maps_to_turns_the_api_accepts_in_shape": "a property",
    "tests/runtime/test_event_log.py::test_events_rebuilt_from_the_compact_log_equal_those_built_as_emitted": "a property",
    "tests/features/test_transfer.py::test_arbitrary_transfers_stay_within_budget_and_end": "a property",
}
"""Tests of a few seconds each (``--durations``), by node id without parameters: marked ``slow``.
A whole module of them says so at its top instead (``pytestmark = pytest.mark.slow``)."""


GROUP_BY_MARKER = {"dbos": "dbos"}
"""Under pytest-xdist (``--dist loadgroup``), the tests of a marker that share a worker: DBOS's
launches, worker processes and kill-and-recover tests (timed) run one at a time, as before xdist."""


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    matched: set[str] = set()
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        for fixture, marker in MARK_BY_FIXTURE.items():
            if fixture in fixtures:
                item.add_marker(marker)
        for marker, group in GROUP_BY_MARKER.items():
            if item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.xdist_group(group))
        if (name := item.nodeid.split("[")[0]) in SLOW:
            item.add_marker("slow")
            matched.add(name)
    files = {item.nodeid.split("::")[0] for item in items}
    stale = [name for name in SLOW if name.split("::")[0] in files and name not in matched]
    whole_files = not config.option.keyword and not any("::" in arg for arg in config.args)
    if stale and whole_files:  # a renamed test would silently join the fast part
        raise pytest.UsageError(f"tests/conftest.py SLOW names tests that do not exist (renamed?): {stale}")


@pytest.fixture
def fake() -> Iterator[FakeClaude]:
    """The Claude fake server (tests/fake_claude.py), for the Claude adapter's tests and the
    features' tests on Claude; tests/models/openai/ and tests/models/gemini/ give their provider's
    fake this name in their own ``conftest.py``."""
    with FakeClaude() as server:
        yield server


@pytest.fixture
def openai_fake() -> Iterator[FakeOpenAI]:
    """The OpenAI fake server (tests/fake_openai.py)."""
    with FakeOpenAI() as server:
        yield server


def _is_full_run(session: pytest.Session) -> bool:
    option = session.config.option
    selected_all = not (
        option.keyword or option.markexpr or getattr(option, "deselect", None) or getattr(option, "lf", False)
    )
    named = [a for a in session.config.args if a.rstrip("/") not in ("tests", ".")]
    return selected_all and not named and session.testsfailed == 0 and not option.collectonly


_WORKERS_MISSING: list[dict[str, list[int]]] = []
"""Under pytest-xdist, in the controller: each worker's rows never taken (by machine name, row number)."""


def _missing_here() -> dict[str, list[int]]:
    """The rows of each built-in machine no run in this process took (by machine name, row number)."""
    from loopwright.features import BUILT_IN_MACHINES
    from loopwright.testing.coverage import coverage

    missing = {name: set(coverage.missing(m)) for name, m in BUILT_IN_MACHINES.items()}
    return {name: [n for n, row in enumerate(m.rows) if row in missing[name]] for name, m in BUILT_IN_MACHINES.items()}


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook, in the controller: a worker has finished
def pytest_testnodedown(node: Any, error: Any) -> None:
    if (missing := getattr(node, "workeroutput", {}).get("loopwright_missing")) is not None:
        _WORKERS_MISSING.append(missing)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller judges the whole run
        session.config.workeroutput["loopwright_missing"] = _missing_here()  # type: ignore[attr-defined]
        return
    if not _is_full_run(session):
        return
    from loopwright.features import BUILT_IN_MACHINES

    per_process = [{name: set(rows) for name, rows in w.items()} for w in _WORKERS_MISSING or [_missing_here()]]
    missing = [  # a row counts as taken if any process took it
        f"{name}: {m.rows[n]}"
        for name, m in BUILT_IN_MACHINES.items()
        for n in sorted(set.intersection(*(w[name] for w in per_process)))
    ]
    if missing:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = "\n".join(f"  {row}" for row in missing)
        message = f"loopwright row coverage: {len(missing)} row(s) of the built-in machines never fired:\n{lines}"
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
