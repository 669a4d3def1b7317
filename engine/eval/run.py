"""``await evaluate(agent, eval_set)``: run every case (``repeats`` times, at most
``concurrency`` runs at once), score each run, and gather an :class:`EvalReport`.

Everything a set could get wrong is checked before the first run: the tools it names, the
functions it names, the cases' limits. Cancelling ``evaluate`` cancels the runs under way.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..data.limits import Limits
from ..data.result import RunResult
from ..loop.runner import Runner
from ..models.base import Model
from ..models.scripted import ScriptedModel
from ..runtime.agent import Agent
from .base import EvalContext, EvalSetError, Observed, Score
from .cases import EvalCase, EvalSet, set_problems
from .evaluators import as_spec
from .mocking import check_fits, mocked_agent
from .replay import replayed_agent
from .report import CaseReport, EvalReport, RunReport, Status, summarise
from .response import text_of


def agent_for_case(agent: Agent, eval_set: EvalSet, case: EvalCase, *, replay: bool = True) -> Agent:
    """The agent a case runs on: its limits, on its recorded replies (``replay``), its tools mocked."""
    if case.limits:
        try:
            limits = Limits.model_validate({**agent.limits.model_dump(), **case.limits})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" if e["loc"] else e["msg"].removeprefix("Value error, ")
                for e in exc.errors(include_url=False)
            )
            raise EvalSetError(f"case {case.name!r}: its limits do not validate: {problems}") from None
        agent = agent.replace(limits=limits)
    if replay and case.replay is not None:
        agent = replayed_agent(agent, case.replay)
    mock_all = case.mock_all if case.mock_all is not None else eval_set.mock_all
    return mocked_agent(agent, [*case.mocks, *eval_set.mocks], mock_all)


def fresh_scripts(agent: Agent) -> Agent:
    """``agent`` with each list-backed ScriptedModel of its tree restarted: every run of a case
    starts from the script's first reply, as a new run of the app would."""
    if not any(isinstance(a.model, ScriptedModel) and a.model.instant for a in agent.walk()):
        return agent
    model = agent.model
    if isinstance(model, ScriptedModel) and model.instant:
        model = ScriptedModel(model.script, name=model.name)
    return agent.replace(model=model, sub_agents=[fresh_scripts(sub) for sub in agent.sub_agents])


async def run_case(agent: Agent, case: EvalCase) -> Observed:
    """Run the case's turns on ``agent`` (each turn continuing the one before)."""
    seen = Observed(case=case, agent=agent)
    runner = Runner(agent)
    after: RunResult | None = None
    for i, text in enumerate(case.turns):
        try:
            if i == 0:
                after = await runner.run(text, state=dict(case.state) if case.state else None)
            else:
                after = await runner.run(text, after=after)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:
            seen.error = f"{type(exc).__name__}: {exc}"
            break
        seen.results.append(after)
        if after.outcome not in ("final", "salvaged"):
            break
    return seen


def specs_for(eval_set: EvalSet, case: EvalCase) -> list[Any]:
    """The evaluators of a case: the set's, except those of a kind the case gives its own of."""
    own = {spec.kind for spec in case.evaluators}
    return [*(spec for spec in eval_set.evaluators if spec.kind not in own), *case.evaluators]


def _cost(tokens_in: int, tokens_out: int, eval_set: EvalSet) -> float | None:
    p = eval_set.prices
    return None if p is None else (tokens_in * p.input_per_mtok + tokens_out * p.output_per_mtok) / 1e6


def _status(scores: list[Score], seen: Observed) -> Status:
    """A run passes only when a check that could fail held: with no score it is "no checks"
    (or failed, when the run itself did not end with an answer)."""
    if any(s.passed is False for s in scores):
        return "failed"
    if any(s.passed is None for s in scores):
        return "not_judged"
    if not scores:
        return "failed" if seen.result is None or seen.result.outcome not in ("final", "salvaged") else "no_checks"
    return "passed"


async def _score(specs: Sequence[Any], seen: Observed, ctx: EvalContext) -> list[Score]:
    scores: list[Score] = []
    for spec in specs:
        try:
            found = await spec.score(seen, ctx)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:  # an evaluator that breaks fails the run, saying so
            found = Score(evaluator=spec.label(), value=0.0, passed=False, reason=f"the evaluator raised {exc!r}")
        if found is not None:
            scores.append(found)
    return scores


async def _one(
    agent: Agent, eval_set: EvalSet, case: EvalCase, repeat: int, specs: Sequence[Any], ctx: EvalContext
) -> RunReport:
    began = time.perf_counter()
    seen = await run_case(fresh_scripts(agent), case)
    tokens_in = sum(
        r.usage.input_tokens + r.usage.cache_read_tokens + r.usage.cache_creation_tokens for r in seen.results
    )
    tokens_out = sum(r.usage.output_tokens for r in seen.results)
    seen.cost_usd = _cost(tokens_in, tokens_out, eval_set)
    scores = await _score(specs, seen, ctx)
    diff = next((list(s.details["diff"]) for s in scores if isinstance(s.details.get("diff"), list)), [])  # type: ignore[arg-type]
    last = seen.result
    return RunReport(
        case=case.name,
        repeat=repeat,
        status=_status(scores, seen),
        run_ids=[r.run_id for r in seen.results],
        outcome=last.outcome if last is not None else None,
        output=text_of(last.output) if last is not None else "",
        error=seen.error or (last.error.message if last is not None and last.error is not None else None),
        scores=scores,
        calls=[c.label() for c in seen.calls],
        diff=[str(line) for line in diff],
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        total_tokens=tokens_in + tokens_out,
        cost_usd=seen.cost_usd,
        duration_s=time.perf_counter() - began,
        events=seen.events,
    )


def _progress(show: bool | None, total: int) -> tuple[AbstractContextManager[Any], Callable[[], None]]:
    if show is None:
        show = sys.stderr.isatty()
    if not show:
        return nullcontext(), lambda: None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("eval"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=Console(stderr=True)
    )
    task = bar.add_task("eval", total=total)
    return bar, lambda: bar.advance(task)


async def evaluate(
    agent: Agent,
    eval_set: EvalSet | str | Path,
    *,
    repeats: int = 1,
    concurrency: int = 4,
    judge: Model | None = None,
    evaluators: Sequence[Any] = (),
    replay: bool = True,
    progress: bool | None = None,
) -> EvalReport:
    """Run every case of ``eval_set`` (a set, or its file) ``repeats`` times on ``agent``, at
    most ``concurrency`` runs at once, and score each run with the set's evaluators, the case's
    and ``evaluators`` (specs, or functions ``(case, result) -> Score``). ``judge``: the model
    of judges that name none. ``replay``: recorded cases run on their recorded replies.
    ``progress``: a progress bar on standard error (default: when it is a terminal)."""
    if not isinstance(eval_set, EvalSet):
        eval_set = EvalSet.load(eval_set)
    if repeats < 1 or concurrency < 1:
        raise EvalSetError(f"repeats and concurrency must be at least 1 (got {repeats} and {concurrency})")
    check_fits(agent, eval_set)
    extra = [as_spec(e) for e in evaluators]
    problems = set_problems(eval_set, extra, explicit=True, own=False)
    if problems:
        raise EvalSetError("\n".join(f"evaluators given to evaluate(): {why}" for _, why in problems))
    agents = {case.name: agent_for_case(agent, eval_set, case, replay=replay) for case in eval_set.cases}
    ctx = EvalContext(judge=judge)
    began = time.perf_counter()
    gate = asyncio.Semaphore(concurrency)
    shown, advance = _progress(progress, len(eval_set.cases) * repeats)

    async def bounded(case: EvalCase, repeat: int) -> RunReport:
        async with gate:
            done = await _one(agents[case.name], eval_set, case, repeat, [*specs_for(eval_set, case), *extra], ctx)
        advance()
        return done

    with shown:
        async with asyncio.TaskGroup() as group:
            tasks = {
                (case.name, k): group.create_task(bounded(case, k)) for case in eval_set.cases for k in range(repeats)
            }
    return _report(agent, eval_set, repeats, {key: t.result() for key, t in tasks.items()}, time.perf_counter() - began)


def _report(
    agent: Agent, eval_set: EvalSet, repeats: int, runs: dict[tuple[str, int], RunReport], took: float
) -> EvalReport:
    cases = []
    for case in eval_set.cases:
        mine = [runs[(case.name, k)] for k in range(repeats)]
        names = list(dict.fromkeys(s.evaluator for r in mine for s in r.scores))
        summaries = [summarise(n, [s for r in mine for s in r.scores if s.evaluator == n]) for n in names]
        rate = sum(r.status == "passed" for r in mine) / len(mine)
        cases.append(CaseReport(name=case.name, tags=case.tags, runs=mine, scores=summaries, pass_rate=rate))
    every = [r for c in cases for r in c.runs]
    rate = sum(r.status == "passed" for r in every) / len(every)
    costs = [r.cost_usd for r in every if r.cost_usd is not None]
    return EvalReport(
        set_name=eval_set.name,
        agent=agent.name,
        repeats=repeats,
        threshold=eval_set.threshold,
        cases=cases,
        pass_rate=rate,
        passed=rate >= eval_set.threshold,
        total_tokens=sum(r.total_tokens for r in every),
        cost_usd=sum(costs) if costs else None,
        duration_s=took,
    )


def evaluate_sync(agent: Agent, eval_set: EvalSet | str | Path, **options: Any) -> EvalReport:
    """:func:`evaluate` from synchronous code (a script, a notebook cell without a loop)."""
    return asyncio.run(evaluate(agent, eval_set, **options))


__all__ = ["agent_for_case", "evaluate", "evaluate_sync", "run_case"]
