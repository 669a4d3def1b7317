"""``loopwright eval`` as a user runs it (subprocesses): the worked example passes and writes its
report, a missed threshold exits 1, a set that does not validate exits 2 with file:line:field
lines, ``compare`` says which cases got worse; and the HTML report checked in Chromium."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwright.machines.diagram import dot_available
from tests import ROOT
from tests.chromium import browser as browser  # the Chromium fixture (playwright, Debian's chromium)

EXAMPLE = ROOT / "examples" / "eval"


def loopwright(*args: str, cwd: Path = EXAMPLE) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "PYTEST_"))}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "loopwright", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=180
    )


@pytest.mark.slow
def test_the_worked_example_passes_from_the_cli_and_writes_its_reports(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    done = loopwright(
        "eval", "run", "trip_agent:agent", "trip.yaml", "--judge", "trip_agent:judge", "--repeats", "2",
        "-o", str(out), "--save", str(tmp_path / "a.json"),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pass rate 100% (threshold 100%): passed" in done.stdout
    assert "6 cases × 2 repeats" in done.stdout and f"wrote {out}" in done.stdout
    report = json.loads((tmp_path / "a.json").read_text())
    assert len(report["cases"]) == 6 and all(len(c["runs"]) == 2 for c in report["cases"])
    first = report["cases"][0]["runs"][0]
    assert first["events"][0]["type"] == "run_started" and first["cost_usd"] > 0
    judged = next(s for s in first["scores"] if s["evaluator"] == "judge")
    assert judged["reason"].startswith("price in USD: yes")  # the judge's reasoning, kept
    pages = sorted((tmp_path / "report-runs").glob("*.html"))
    assert len(pages) == 12 and all(p.stem in out.read_text() for p in pages)


@pytest.mark.slow
def test_a_missed_threshold_exits_1_and_json_prints_the_report(tmp_path: Path) -> None:
    strict = (EXAMPLE / "trip.yaml").read_text().replace("Porto is warmer (31 °C", "Lisbon is warmer")
    (tmp_path / "set.yaml").write_text(strict)
    (tmp_path / "trip_agent.py").write_text((EXAMPLE / "trip_agent.py").read_text())
    done = loopwright("eval", "run", "trip_agent:agent", "set.yaml", "--judge", "trip_agent:judge", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL  porto-heatwave" in done.stdout and "MISSED the threshold" in done.stdout
    as_json = loopwright("eval", "run", "trip_agent:agent", "set.yaml", "--json", cwd=tmp_path)
    assert as_json.returncode == 1
    report = json.loads(as_json.stdout)
    assert report["passed"] is False and report["pass_rate"] < 1


@pytest.mark.slow
def test_bad_input_exits_2_with_one_line_per_problem(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("cases:\n  - name: x\n    input: hi\n    tags: notalist\n")
    done = loopwright("eval", "run", "trip_agent:agent", str(tmp_path / "bad.yaml"))
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == f"loopwright eval run: {tmp_path / 'bad.yaml'}:4: cases[0](x).tags: Input should be a valid list"
    )
    (tmp_path / "typo.yaml").write_text(
        "cases:\n  - name: x\n    input: hi\n    expected_calls: [{name: get_wether}]\n"
    )
    done = loopwright("eval", "run", "trip_agent:agent", str(tmp_path / "typo.yaml"))
    assert done.returncode == 2
    assert "case 'x' expects a call of tool 'get_wether', which agent 'trip_assistant' lacks" in done.stderr
    assert "has these tools: convert_currency, get_weather, hotel_price" in done.stderr
    assert loopwright("eval", "run", "nowhere:agent", "trip.yaml").returncode == 2
    assert loopwright("eval", "run", "trip_agent:agent", "trip.yaml", "--repeats", "0").returncode == 2


@pytest.mark.slow
def test_compare_says_which_cases_got_worse(tmp_path: Path) -> None:
    base = loopwright(
        "eval",
        "run",
        "trip_agent:agent",
        "trip.yaml",
        "--judge",
        "trip_agent:judge",
        "--save",
        str(tmp_path / "a.json"),
    )
    assert base.returncode == 0
    (tmp_path / "trip_agent.py").write_text(
        (EXAMPLE / "trip_agent.py").read_text().replace('"celsius": 24.0', '"celsius": 24.0')
        + "\nfrom loopwright.demo import agents as _demo\n_demo._RATES[('EUR', 'USD')] = 2.0\n"
    )
    (tmp_path / "trip.yaml").write_text((EXAMPLE / "trip.yaml").read_text())
    worse = loopwright(
        "eval",
        "run",
        "trip_agent:agent",
        "trip.yaml",
        "--judge",
        "trip_agent:judge",
        "--save",
        str(tmp_path / "b.json"),
        cwd=tmp_path,
    )
    assert worse.returncode == 1
    done = loopwright("eval", "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("  worse   affordable-lisbon: pass rate 100% -> 0%") for line in lines), lines
    assert any(line.startswith("  same    porto-heatwave") for line in lines), lines
    same = loopwright("eval", "compare", str(tmp_path / "a.json"), str(tmp_path / "a.json"))
    assert same.returncode == 0
    assert loopwright("eval", "compare", str(tmp_path / "a.json"), str(EXAMPLE / "trip.yaml")).returncode == 2


def test_the_schema_command_prints_the_published_schema() -> None:
    import contextlib
    import io

    from loopwright.cli.app import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["eval", "schema"]) == 0
    assert json.loads(out.getvalue()) == json.loads((ROOT / "docs" / "reference" / "eval-set.schema.json").read_text())


@pytest.mark.skipif(not dot_available(), reason="the trace pages' drawing needs Graphviz (apt-get install graphviz)")
def test_in_chromium_the_report_shows_the_cases_the_diff_and_links_to_each_trace(browser: Any, tmp_path: Path) -> None:
    import asyncio
    import concurrent.futures

    sys.path.insert(0, str(EXAMPLE))
    try:
        from trip_agent import agent, judge  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(EXAMPLE))
    from loopwright.cli.eval_command import _write_html
    from loopwright.eval import EvalSet, ExpectedCall, evaluate

    eval_set = EvalSet.load(EXAMPLE / "trip.yaml")
    porto = eval_set.cases[1]
    never_made = ExpectedCall(name="hotel_price", args={"city": "Porto", "nights": 3})
    porto = porto.model_copy(update={"expected_calls": [*(porto.expected_calls or []), never_made]})
    broken = eval_set.model_copy(update={"cases": [eval_set.cases[0], porto]})
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # (playwright's own loop runs in this thread)
        report = pool.submit(asyncio.run, evaluate(agent, broken, judge=judge, progress=False)).result()
    path = tmp_path / "report.html"
    _write_html(report, path, agent)
    page = browser.new_page()
    page.goto(path.as_uri())
    assert page.locator("#cases tr.case").count() == 2
    assert page.locator("#verdict").inner_text().startswith("pass rate 50%")
    failing = page.locator("details#case-porto-heatwave")
    assert failing.get_attribute("open") is not None  # failed cases open at once
    missing = failing.locator("pre.diff .missing")
    assert missing.count() == 1 and missing.inner_text() == '- hotel_price(city="Porto", nights=3)'
    assert missing.evaluate("e => getComputedStyle(e).color") == "rgb(179, 38, 30)"
    passing = page.locator("details#case-affordable-lisbon")
    assert not passing.locator(".run").is_visible()
    passing.locator("summary").click()
    assert passing.locator(".run").is_visible()
    link = passing.locator("a.trace-link").first
    link.click()
    page.wait_for_load_state()
    assert page.url.endswith(".html") and "report-runs" in page.url
    assert page.locator("svg").count() >= 1 and "trip_assistant" in page.title()
    page.close()
