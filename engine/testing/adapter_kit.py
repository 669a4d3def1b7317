"""A conformance kit for model adapters: what any adapter (``AnthropicModel``, ``OpenAIModel``,
yours) must do, checked against a fake server of its wire protocol over real HTTP — the SDK is
real, only the server is yours.

You write a small :class:`AdapterHarness` for your adapter: it makes the adapter pointed at your
fake server, scripts the server's next replies from the kit's neutral :class:`Reply` and
:class:`Failure` values (in your wire format), and reads back what the server received. The kit
then checks, through the real :class:`~loopwright.Runner` where a run is involved:

- ``tool_round_trip``: a tool call runs and its result goes back under the call's id;
- ``parallel_calls_in_order``: three calls in one reply are answered in the order asked;
- ``stream_equals_complete``: ``stream`` ends with the reply ``complete`` gives, and its text
  deltas add up to that reply's text (a hypothesis property in :class:`AdapterConformance`);
- ``errors_mapped``: 429/500/503 are retryable ``ModelError``s with their status, 400/401/403/404
  are not, the ``Retry-After`` the server sent is ``retry_after`` (and a run waits at least that
  long before its retry), a server that is down is a retryable ``ModelError`` (never a raw
  exception);
- ``context_window``: the server's "the prompt is too long" is ``ContextWindowError``, and a run
  takes the token-budget edge instead of failing;
- ``cut_reply_continued``: a reply cut by the output limit keeps its partial text, the run goes
  round and the partial text is sent back;
- ``usage_summed``: each reply's usage (input, output, cached input) is reported and a run sums it;
- ``request_not_mutated``: ``complete`` leaves the request as it was, and the same request
  makes the same body twice;
- ``ids_unique``: a reply that repeats a call id still gets each call run and answered once,
  under ids unique in the run, and what the server receives matches;
- ``foreign_thought_signatures``: a tool turn another provider made (a fallback in the middle of
  a tool loop), holding another model's thought signature and another provider's reasoning,
  replays here: the server accepts the request (a Gemini 3 server wants a signature on the call),
  the call is answered, and neither the signature nor the reasoning is sent.

Server quirks (:data:`QUIRKS`: what OpenAI-compatible and other servers really send), one case
each, for harnesses that script them (:class:`QuirkHarness`); where a quirk cannot occur on the
harness's API the case does not apply and says why (pytest: skipped with the reason;
:func:`check_adapter` returns them):

- ``calls_without_index``: two streamed calls without an index, or both at index 0, stay two;
- ``calls_without_ids``: calls without an id get unique ids of their own; both run;
- ``object_arguments``: arguments given as an object are the arguments;
- ``no_usage``: a reply without usage is estimated, says so, and ``max_total_tokens`` fires;
- ``reasoning_returned``: reasoning sent with a tool call comes back on the next request.

The kit is three modules: :mod:`.adapter_harness` (the harness protocol and the values it
scripts), :mod:`.adapter_checks` (the checks and :func:`check_adapter`) and this one (the pytest
class :class:`AdapterConformance`, and every public name in one place).

Two ways to run it::

    # pytest: subclass, give the harness fixture; one test per check (plus the property)
    class TestMyAdapter(AdapterConformance):
        @pytest.fixture
        def harness(self):
            with MyFakeServer() as server:
                yield MyHarness(server)

    # anywhere: every check, failures gathered into one AssertionError
    await check_adapter(MyHarness(server))
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, ClassVar

from .adapter_checks import (
    CHECKS,
    check_adapter,
    check_context_window,
    check_cut_reply_continued,
    check_errors_mapped,
    check_ids_unique,
    check_parallel_calls_in_order,
    check_request_not_mutated,
    check_stream_equals_complete,
    check_tool_round_trip,
    check_usage_summed,
)
from .adapter_harness import QUIRKS, AdapterHarness, Call, Failure, NotApplicable, QuirkHarness, Reply, dead_port

__all__ = [
    "CHECKS",
    "QUIRKS",
    "AdapterConformance",
    "AdapterHarness",
    "Call",
    "Failure",
    "NotApplicable",
    "QuirkHarness",
    "Reply",
    "check_adapter",
    "dead_port",
]

# ------------------------------------------------------------------ pytest


def _replies() -> Any:
    """A hypothesis strategy of replies: some text (any Unicode but surrogates), up to three
    calls with unique ids and JSON arguments, usage numbers."""
    from hypothesis import strategies as st

    words = st.text(st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=40).filter(str.strip)
    args = st.dictionaries(
        st.sampled_from(["q", "n", "flag"]), st.one_of(st.text(max_size=10), st.integers(-9, 99), st.booleans())
    )
    ids = st.lists(st.from_regex(r"call_[a-z0-9]{1,10}", fullmatch=True), max_size=3, unique=True)
    counts = st.integers(0, 5000)

    @st.composite
    def reply(draw: Any) -> Reply:
        calls = tuple(Call(i, "lookup", draw(args)) for i in draw(ids))
        return Reply(
            text=draw(words) if not calls or draw(st.booleans()) else "",
            calls=calls,
            input_tokens=draw(counts),
            cached_tokens=draw(counts),
            output_tokens=draw(counts),
        )

    return reply()


def _run(check: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
    asyncio.run(check(*args))


def _run_known(reason: str | None, check: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
    try:
        _run(check, *args)
    except NotApplicable as exc:
        import pytest

        pytest.skip(f"not applicable: {exc}")
    except AssertionError:
        if reason is None:
            raise
        import pytest

        pytest.xfail(reason)


class AdapterConformance:
    """Subclass in a test module and give a ``harness`` fixture (an :class:`AdapterHarness`);
    each check becomes a test, and ``stream_equals_complete`` also runs as a hypothesis
    property over generated replies (``max_examples`` of them). ``skip_checks`` maps a check's
    name to why it is skipped for this adapter (shown by ``pytest -rs``)."""

    skip_checks: ClassVar[dict[str, str]] = {}
    known_failures: ClassVar[dict[str, str]] = {}
    """Checks this adapter is known to fail, each with why: a failure is reported as xfail, a pass passes."""
    max_examples: ClassVar[int] = 10

    def _maybe_skip(self, name: str) -> None:
        if name in self.skip_checks:
            import pytest

            pytest.skip(self.skip_checks[name])

    def test_tool_round_trip(self, harness: AdapterHarness) -> None:
        self._maybe_skip("tool_round_trip")
        _run_known(self.known_failures.get("tool_round_trip"), check_tool_round_trip, harness)

    def test_parallel_calls_in_order(self, harness: AdapterHarness) -> None:
        self._maybe_skip("parallel_calls_in_order")
        _run_known(self.known_failures.get("parallel_calls_in_order"), check_parallel_calls_in_order, harness)

    def test_stream_equals_complete(self, harness: AdapterHarness) -> None:
        self._maybe_skip("stream_equals_complete")
        _run_known(self.known_failures.get("stream_equals_complete"), check_stream_equals_complete, harness)

    def test_stream_equals_complete_property(self, harness: AdapterHarness) -> None:
        """The property over generated replies (hypothesis; examples run in a fresh loop each)."""
        self._maybe_skip("stream_equals_complete")
        from hypothesis import HealthCheck, given, settings

        @settings(max_examples=self.max_examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(reply=_replies())
        def prop(reply: Reply) -> None:
            _run(check_stream_equals_complete, harness, reply)  # (known_failures do not apply to the property)

        prop()

    def test_errors_mapped(self, harness: AdapterHarness) -> None:
        self._maybe_skip("errors_mapped")
        _run_known(self.known_failures.get("errors_mapped"), check_errors_mapped, harness)

    def test_context_window(self, harness: AdapterHarness) -> None:
        self._maybe_skip("context_window")
        _run_known(self.known_failures.get("context_window"), check_context_window, harness)

    def test_cut_reply_continued(self, harness: AdapterHarness) -> None:
        self._maybe_skip("cut_reply_continued")
        _run_known(self.known_failures.get("cut_reply_continued"), check_cut_reply_continued, harness)

    def test_usage_summed(self, harness: AdapterHarness) -> None:
        self._maybe_skip("usage_summed")
        _run_known(self.known_failures.get("usage_summed"), check_usage_summed, harness)

    def test_request_not_mutated(self, harness: AdapterHarness) -> None:
        self._maybe_skip("request_not_mutated")
        _run_known(self.known_failures.get("request_not_mutated"), check_request_not_mutated, harness)

    def test_ids_unique(self, harness: AdapterHarness) -> None:
        self._maybe_skip("ids_unique")
        _run_known(self.known_failures.get("ids_unique"), check_ids_unique, harness)

    # ---------------------------------------------------------------- server quirks

    def test_calls_without_index(self, harness: AdapterHarness) -> None:
        self._maybe_skip("calls_without_index")
        _run_known(self.known_failures.get("calls_without_index"), CHECKS["calls_without_index"], harness)

    def test_calls_without_ids(self, harness: AdapterHarness) -> None:
        self._maybe_skip("calls_without_ids")
        _run_known(self.known_failures.get("calls_without_ids"), CHECKS["calls_without_ids"], harness)

    def test_object_arguments(self, harness: AdapterHarness) -> None:
        self._maybe_skip("object_arguments")
        _run_known(self.known_failures.get("object_arguments"), CHECKS["object_arguments"], harness)

    def test_no_usage(self, harness: AdapterHarness) -> None:
        self._maybe_skip("no_usage")
        _run_known(self.known_failures.get("no_usage"), CHECKS["no_usage"], harness)

    def test_reasoning_returned(self, harness: AdapterHarness) -> None:
        self._maybe_skip("reasoning_returned")
        _run_known(self.known_failures.get("reasoning_returned"), CHECKS["reasoning_returned"], harness)

    def test_foreign_thought_signatures(self, harness: AdapterHarness) -> None:
        self._maybe_skip("foreign_thought_signatures")
        _run_known(self.known_failures.get("foreign_thought_signatures"), CHECKS["foreign_thought_signatures"], harness)


def _names() -> Iterator[str]:  # every check has its test (tests/models/test_adapter_kit.py asserts it)
    return (name.removeprefix("test_") for name in vars(AdapterConformance) if name.startswith("test_"))
