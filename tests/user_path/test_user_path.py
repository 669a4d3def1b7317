"""The product as users run it: each script runs in a fresh interpreter (no pytest in the child)
whose first line imports loopwright, so nothing imported before it can hide a fault of its own.

CI runs this module on every supported Python (3.11, 3.12, 3.13: ``.ci/run``), on asyncio's own
event loop and on uvloop. It runs every Python block of the README and of the docs pages too.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import ROOT
from tests.fake_claude import FakeClaude, message, text, tool_use

pytestmark = pytest.mark.slow  # every script in a fresh interpreter


FIRST_LINE = re.compile(r"^(from loopwright(\.[\w.]+)? import |import loopwright)")


END_MARK = "loopwright-test: the script ran to its last line"
"""What a script prints last when a crash in the interpreter's teardown is not its own (see run_script)."""


def run_script(
    source: str,
    tmp_path: Path,
    *,
    flags: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    timeout: float = 120,
    teardown_crash_ok: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``source`` as ``python [flags] app.py`` in ``tmp_path``; its first line must import
    loopwright (what a user's program does), and it must exit 0.

    ``teardown_crash_ok``: a script that uses temporalio may die of SIGSEGV/SIGABRT *after* its last
    line, while CPython finalizes: the SDK's Rust bridge threads outlive the interpreter (seen here on
    3.12, about 1 run in 5; reported against temporalio, e.g. PostHog/posthog#53093). Such an exit
    passes only if the script printed :data:`END_MARK` as its last line, so everything it does ran."""
    source = textwrap.dedent(source).lstrip()
    assert FIRST_LINE.match(source), f"the script's first line must import loopwright: {source.splitlines()[0]!r}"
    script = tmp_path / "app.py"
    script.write_text(source)
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "PYTHONPATH"))}
    child_env.update(env or {})
    done = subprocess.run(
        [sys.executable, *flags, str(script)],
        cwd=tmp_path,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if teardown_crash_ok and done.returncode in (-signal.SIGSEGV, -signal.SIGABRT):
        assert done.stdout.rstrip().endswith(END_MARK), f"exit {done.returncode} before the script's end\n{done.stdout}"
        return done
    assert done.returncode == 0, f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    return done


def test_a_model_that_really_awaits_ends_final(tmp_path: Path) -> None:
    """The fault this module was written for: with loopwright imported first, asyncio's tasks
    knew no current task, and every model call that awaited failed."""
    done = run_script(
        """
        from loopwright import Agent, ModelResponse, Runner, TextPart
        import asyncio

        class Slow:
            async def complete(self, request):
                await asyncio.sleep(0.01)
                return ModelResponse(parts=(TextPart(text="hi"),), stop_reason="end_turn")

        result = Runner(Agent(name="a", model=Slow())).run_sync("hello")
        print(result.outcome, result.output)
        assert result.outcome == "final", result.error
        """,
        tmp_path,
    )
    assert done.stdout.strip() == "final hi"


@pytest.mark.parametrize("first", ["from loopwright import Agent, Runner", "import loopwright"])
def test_importing_loopwright_leaves_asyncio_as_it_was(tmp_path: Path, first: str) -> None:
    """After loopwright's import: tasks know themselves, ``asyncio.timeout`` works, sniffio
    (anyio, httpx) tells the library."""
    body = textwrap.dedent(
        """
        import loopwright
        import asyncio

        import sniffio

        async def main() -> None:
            assert asyncio.current_task() is not None
            async with asyncio.timeout(1):
                await asyncio.sleep(0)
            assert sniffio.current_async_library() == "asyncio"

        asyncio.run(main())
        assert loopwright.Runner is not None
        """
    )
    run_script(first + "\n" + body, tmp_path)


_ASYNCIO_STATE = """
import asyncio
import asyncio.futures
import asyncio.tasks
import json

names = ("Task", "Future", "current_task", "all_tasks", "_enter_task", "_leave_task", "_register_task")
state = {
    name: f"{getattr(m, name).__module__}.{getattr(m, name).__qualname__}"
    for m in (asyncio.tasks, asyncio.futures) for name in names if hasattr(m, name)
}
import _asyncio  # (after asyncio: the probe itself must not be the import that changes it)

# the registry of current tasks asyncio's functions read is the one its C tasks fill
state["shared registry"] = getattr(asyncio.tasks, "_current_tasks", None) is getattr(_asyncio, "_current_tasks", None)


async def probe() -> bool:
    return asyncio.current_task() is not None


state["a task knows itself"] = asyncio.run(probe())
print(json.dumps(state))
"""


def test_no_loopwright_module_changes_asyncio_at_import(tmp_path: Path) -> None:
    """asyncio, imported after every module of loopwright, is the asyncio a plain
    ``import asyncio`` gives: its C task functions and classes, not the Python fallbacks."""
    plain = subprocess.run([sys.executable, "-c", _ASYNCIO_STATE], capture_output=True, text=True, check=True)
    modules = [
        "loopwright." + p.relative_to(ROOT / "engine").with_suffix("").as_posix().replace("/", ".")
        for p in sorted((ROOT / "engine").rglob("*.py"))
        if p.name not in ("__init__.py", "__main__.py")
    ]
    every = "".join(  # a module whose extra is not installed says so at import (ImportError or ConfigurationError)
        f"try:\n    import {name}\nexcept (ImportError, ConfigurationError):\n    pass\n" for name in modules
    )
    after = run_script(f"from loopwright.data.errors import ConfigurationError\n{every}\n{_ASYNCIO_STATE}", tmp_path)
    assert after.stdout == plain.stdout
    assert json.loads(plain.stdout)["a task knows itself"]


TOOLS_AGENT = """
    from loopwright import Agent, Limits, ModelRequest, ModelResponse, Runner, TextPart, ToolCall, tool
    import asyncio

    class Model:
        '''Calls every tool once (awaiting a little first, as a real model does), then answers.'''

        def __init__(self, *names: str) -> None:
            self.names = list(names)

        async def complete(self, request: ModelRequest) -> ModelResponse:
            await asyncio.sleep(0.001)
            if self.names:
                call = ToolCall(name=self.names.pop(0), args={})
                return ModelResponse(parts=(call,), stop_reason="tool_use")
            results = [p for m in request.messages for p in m.parts if p.type == "tool_result"]
            return ModelResponse(parts=(TextPart(text=repr([r.content for r in results])),), stop_reason="end_turn")
"""


def test_tools_using_asyncio_timeout_and_httpx(tmp_path: Path) -> None:
    """A tool under ``asyncio.timeout`` and one that fetches a page with an httpx client (over
    a real socket, from a server in the child) both run: neither sees a task-less loop."""
    done = run_script(
        TOOLS_AGENT
        + """
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import httpx

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"hello from http"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"

    @tool
    async def timed() -> str:
        '''Sleep briefly under asyncio.timeout.'''
        async with asyncio.timeout(2):
            await asyncio.sleep(0.01)
        return "in time"

    @tool
    async def fetch() -> str:
        '''Fetch a page.'''
        async with httpx.AsyncClient() as client:
            return (await client.get(url)).text

    agent = Agent(name="a", model=Model("timed", "fetch"), tools=[timed, fetch], limits=Limits(max_iterations=5))
    result = Runner(agent).run_sync("go")
    server.shutdown()
    assert result.outcome == "final", result.error
    print(result.output)
    """,
        tmp_path,
    )
    assert done.stdout.strip() == "['in time', 'hello from http']"


LOOP_RUN = """
    import sys

    import uvloop

    import contextvars

    from loopwright import ScriptedModel

    request_id = contextvars.ContextVar("request_id", default="unset")

    @tool(timeout_s=0.05)  # a timer of its own (bounds under 2 s)
    async def slow() -> str:
        '''Takes longer than its timeout.'''
        await asyncio.sleep(5)
        return "late"

    @tool(blocking=False)
    def inline(n: int) -> int:
        '''Returns at once, on the loop (never suspends).'''
        return n

    @tool
    async def timed() -> str:
        '''Sleep briefly under asyncio.timeout; the run's task and context are the tool's.'''
        task = asyncio.current_task()
        async with asyncio.timeout(2):
            await asyncio.sleep(0.01)
        assert asyncio.current_task() is task and request_id.get() == "r-1", (task, request_id.get())
        return "in time"

    class Hangs:
        async def complete(self, request: ModelRequest) -> ModelResponse:
            await asyncio.sleep(30)
            raise AssertionError("not reached")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        assert type(loop).__module__.startswith("uvloop") == (MODE != "asyncio.run"), type(loop)
        agent = Agent(name="a", model=Model("timed", "slow"), tools=[timed, slow], limits=Limits(max_iterations=5))
        request_id.set("r-1")
        result = await Runner(agent).run("go")
        assert result.outcome == "final", result.error
        assert result.output.startswith("['in time', \\"tool 'slow' timed out after 0.05 s"), result.output
        # a model call over the shared quarter-second watch (bounds of 2 s and more)
        hung = Agent(name="h", model=Hangs(), limits=Limits(model_timeout_s=2, max_model_retries=0))
        started = loop.time()
        failed = await Runner(hung).run("go")
        assert failed.outcome == "failed" and "timed out" in str(failed.error), failed.error
        assert 2 <= loop.time() - started < 4
        # the runner's fairness on a loop that is not asyncio's own: another task still runs
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        beat = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        # neither the model nor the tool ever suspends
        calls = [[ToolCall(name="inline", args={"n": n})] for n in range(40)] + ["done"]
        busy = Agent(name="b", model=ScriptedModel(calls), tools=[inline], limits=Limits(max_iterations=50))
        finished = await Runner(busy).run("go")
        beat.cancel()
        assert finished.outcome == "final", (finished.outcome, finished.limit, finished.error)
        assert ticks > 20, f"the other task ran {ticks} times beside 40 iterations of a run that never suspends"
        print("ok", MODE)
"""


@pytest.mark.parametrize("mode", ["asyncio.run", "uvloop.run", "loop_factory"])
def test_a_run_on_asyncio_and_on_uvloop(tmp_path: Path, mode: str) -> None:
    """asyncio's loop and uvloop run the same: model and tool timeouts (a timer of their own and
    the shared watch), ``asyncio.timeout`` inside a tool that sees the run's task and context,
    and another task keeps running beside a run that never suspends (the fairness yields: the
    probe of asyncio's own loop, and its fallback elsewhere)."""
    pytest.importorskip("uvloop", reason="uvloop is in loopwright[dev]; CI installs it")
    if mode == "asyncio.run":
        start = "asyncio.run(main())"
    elif mode == "uvloop.run":
        start = "uvloop.run(main())"
    elif sys.version_info >= (3, 12):
        start = "asyncio.run(main(), loop_factory=uvloop.new_event_loop)"
    else:  # 3.11's asyncio.run has no loop_factory; its Runner does
        start = "with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:\n    runner.run(main())"
    source = TOOLS_AGENT + f"\n    MODE = {mode!r}\n" + LOOP_RUN + textwrap.indent(start, "    ") + "\n"
    done = run_script(source, tmp_path)
    assert done.stdout.strip() == f"ok {mode}"


def test_the_first_example_on_claude_over_http(tmp_path: Path) -> None:
    """The README's first example with its ScriptedModel swapped for ``AnthropicModel``, against
    the fake Messages API over HTTP, run as ``python app.py``."""
    readme = (ROOT / "README.md").read_text()
    first = re.findall(r"```python\n(.*?)```", readme, flags=re.S)[0]
    scripted = re.findall(r"^model = ScriptedModel\(.*\)$", first, flags=re.M)
    assert len(scripted) == 1, "the README's first example keeps its model on one `model = ScriptedModel(...)` line"
    assert FIRST_LINE.match(first)
    claude = first.replace(scripted[0], 'model = AnthropicModel("claude-sonnet-5-5")')
    first_line, rest = claude.split("\n", 1)  # the user's import line stays first, as in the README
    claude = f"{first_line}\nfrom loopwright import AnthropicModel\n{rest}"
    script = [message(tool_use("toolu_1", "add", {"a": 2, "b": 3}), stop_reason="tool_use"), message(text("2 + 3 = 5"))]
    with FakeClaude(script=script) as server:
        run_script(claude, tmp_path, env={"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "test-key"})
    assert len(server.requests) == 2
    assert server.requests[1]["messages"][-1]["content"][0]["type"] == "tool_result"


# ------------------------------------------------------------------ every page's Python blocks


def _pages() -> list[Path]:
    docs = ROOT / "docs"
    return [ROOT / "README.md", *sorted(docs.rglob("*.md"))] if docs.is_dir() else [ROOT / "README.md"]


def _blocks() -> list[tuple[str, int, str]]:
    found = []
    for page in _pages():
        for index, block in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S)):
            found.append((str(page.relative_to(ROOT)), index, block))
    return found


_RUN_TESTS = """

for _name, _value in list(globals().items()):  # an example that defines tests: run them too
    if _name.startswith("test_") and callable(_value):
        _value()
"""


@pytest.mark.parametrize(("page", "index", "block"), _blocks(), ids=[f"{p}:{i}" for p, i, _ in _blocks()])
def test_every_python_block_of_the_docs_runs_as_a_script(tmp_path: Path, page: str, index: int, block: str) -> None:
    """Each block as a user would paste it into ``app.py``: loopwright imported first (a block
    that starts with another import gets ``import loopwright`` above it)."""
    if "dbos" in block and sys.version_info >= (3, 12) and sqlite3.sqlite_version_info < (3, 42):
        pytest.skip(  # DBOS's own fault, not loopwright's: it writes NULL timestamps there
            f"DBOS on Python 3.12+ uses unixepoch('subsec'), which SQLite {sqlite3.sqlite_version} lacks "
            "(3.42 has it); this interpreter links an older SQLite"
        )
    source = block if FIRST_LINE.match(block) else "import loopwright\n" + block
    temporal = "temporalio" in block
    ending = f"\nprint({END_MARK!r}, flush=True)\n" if temporal else ""
    run_script(source + _RUN_TESTS + ending, tmp_path, teardown_crash_ok=temporal)
