"""The user's input may carry images and documents: ``Runner.run``/``run_sync``/``stream`` take a
str or a sequence of parts (text, images and documents by path, bytes or URL), which reach the
Messages API (tests/fake_claude.py, over real HTTP) as its blocks; bad input is a clear error."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anthropic
import pytest

from loopwright import Agent, AnthropicModel, ConfigurationError, Runner, RunState, ScriptedModel
from loopwright.cli.trace_page import trace_page
from loopwright.data.events import DocumentPart, ImagePart, TextPart, ToolCall
from loopwright.data.inputs import input_text
from tests.fake_claude import FakeClaude, message, text
from tests.models.anthropic.test_anthropic_images import PDF, PNG, b64


def claude(fake: FakeClaude) -> Agent:
    """An agent on AnthropicModel whose client factory points at the fake (one client per loop)."""
    model = AnthropicModel(
        "claude-sonnet-5-5",
        max_tokens=512,
        cache=None,
        client=lambda: anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="k", max_retries=0),
    )
    return Agent(name="viewer", model=model, static_instruction="You are terse.")


def parts_given(tmp_path: Path) -> list[Any]:
    (tmp_path / "shot.png").write_bytes(PNG)
    (tmp_path / "report.pdf").write_bytes(PDF)
    return [
        "What do these show?",
        ImagePart.from_path(tmp_path / "shot.png"),
        tmp_path / "report.pdf",  # a path: sniffed, a PDF becomes a document
        PNG,  # bytes of an image
        ImagePart(url="https://img.example/chart.png"),
        DocumentPart(text="Q3 notes: sales up 4%.", title="notes"),
    ]


SENT = [
    {"type": "text", "text": "What do these show?"},
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}},
    {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)},
        "title": "report.pdf",
    },
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}},
    {"type": "image", "source": {"type": "url", "url": "https://img.example/chart.png"}},
    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Q3 notes: sales up 4%."},
     "title": "notes"},
]  # fmt: skip


def test_run_sync_sends_images_and_documents_as_the_apis_blocks(fake: FakeClaude, tmp_path: Path) -> None:
    fake.script.append(message(text("A chart and a report.")))
    result = Runner(claude(fake)).run_sync(parts_given(tmp_path))
    assert result.outcome == "final" and result.output == "A chart and a report."
    assert fake.requests[0]["messages"][0] == {"role": "user", "content": SENT}
    first = result.messages[0]
    assert first.role == "user" and [p.type for p in first.parts] == [
        "text", "image", "document", "image", "image", "document"
    ]  # fmt: skip
    started = result.events[0]
    assert started.type == "run_started" and started.input == first.parts
    assert input_text(started.input) == (
        "What do these show? [image image/png] [document report.pdf] [image image/png] "
        "[image https://img.example/chart.png] [document notes]"
    )
    assert "What do these show? [image image/png]" in trace_page(result)


def test_run_and_stream_take_parts_too(fake: FakeClaude, tmp_path: Path) -> None:
    fake.script += [message(text("One.")), message(text("Two."))]
    runner = Runner(claude(fake))

    async def go() -> tuple[str | None, str | None]:
        first = await runner.run(parts_given(tmp_path))
        stream = runner.stream([TextPart(text="And this?"), ImagePart(url="https://img.example/b.png")])
        async for _ in stream:
            pass
        return first.output, stream.result.output

    assert asyncio.run(go()) == ("One.", "Two.")
    assert fake.requests[0]["messages"][0]["content"] == SENT
    assert fake.requests[1]["messages"][0]["content"] == [
        {"type": "text", "text": "And this?"},
        {"type": "image", "source": {"type": "url", "url": "https://img.example/b.png"}},
    ]


def test_a_conversation_continued_with_after_keeps_the_image(fake: FakeClaude) -> None:
    fake.script += [message(text("A red dot.")), message(text("Round."))]
    runner = Runner(claude(fake))
    first = runner.run_sync(["What is it?", PNG])
    second = runner.run_sync("What shape?", after=first)
    assert second.output == "Round."
    sent = fake.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[0]["content"][1]["type"] == "image" and sent[2]["content"] == [{"type": "text", "text": "What shape?"}]


def test_a_run_with_parts_saves_and_loads(tmp_path: Path) -> None:
    runner = Runner(Agent(name="a", model=ScriptedModel(["seen"])))
    result = runner.run_sync(["Look:", PNG, DocumentPart(text="notes")])
    loaded = RunState.from_json(result.run_state.to_json())
    assert loaded.input == result.run_state.input and loaded.messages == result.messages
    assert isinstance(loaded.input, tuple) and isinstance(loaded.input[1], ImagePart)


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (
            [ToolCall(id="c1", name="pay", args={})],
            "item 0 of the user input is a ToolCall part ('tool_call'), which a user's message cannot carry",
        ),
        (
            ["Look:", Path("/nonexistent/shot.png")],
            "item 1 of the user input: cannot read the file '/nonexistent/shot.png' (No such file or directory)",
        ),
        ([b"plain bytes"], "item 0 of the user input is 11 bytes of neither an image"),
        ([], "the user input is an empty sequence"),
        (42, "the user input must be a str or a sequence of parts, got int"),
        (b"\x89PNG", "the user input must be a str or a sequence of parts, got bytes"),
        ([ImagePart()], "item 0 of the user input is an ImagePart with neither a url, a file_id nor data"),
        ([DocumentPart(title="t")], "item 0 of the user input is a DocumentPart with no url, text, file_id or data"),
        ([{"type": "text", "text": "hi"}], "item 0 of the user input is a dict, which"),
    ],
)
def test_bad_input_is_a_clear_error_before_anything_runs(given: Any, says: str) -> None:
    model = ScriptedModel(["never"])
    runner = Runner(Agent(name="a", model=model))
    with pytest.raises(ConfigurationError) as caught:
        runner.run_sync(given)
    assert says in str(caught.value)
    assert "the input is a str, or a sequence of str, TextPart, ImagePart, DocumentPart" in str(caught.value) or (
        "give" in str(caught.value) or "make it with" in str(caught.value)
    )
    assert model.requests == [] and runner._active == {}
