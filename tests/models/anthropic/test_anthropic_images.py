"""Images and documents over real HTTP (tests/fake_claude.py): user turns and tool results carry
image and document parts, mapped to the API's blocks (base64, URL, plain text); bytes a tool
returns become an image or document part, or a plain word on what they were — never a crash."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import anthropic
import pytest

from loopwright import AnthropicModel, tool
from loopwright.data.events import DocumentPart, ImagePart, Message, ModelRequest, TextPart
from tests.fake_claude import FakeClaude, message, text, tool_use
from tests.models.anthropic.test_anthropic_model import agent, run

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde"
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _answered(fake: FakeClaude, returns: Any, is_error: bool = False) -> Any:
    """Run one tool call whose tool returns ``returns``; the tool_result content the API got."""

    @tool
    def screenshot() -> Any:
        """Take a screenshot."""
        return returns

    fake.script += [message(tool_use("s1", "screenshot", {}), stop_reason="tool_use"), message(text("I see it."))]
    a = agent(fake).replace(tools=[screenshot])
    result = run(a)
    assert result.outcome == "final" and result.output == "I see it."
    block = fake.requests[1]["messages"][-1]["content"][0]
    assert block["type"] == "tool_result" and block["is_error"] is is_error
    return block["content"]


def test_png_bytes_from_a_tool_reach_the_model_as_an_image(fake: FakeClaude) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}}
    assert _answered(fake, PNG) == [image]


def test_a_tool_returning_text_and_an_image_part(fake: FakeClaude, tmp_path: Path) -> None:
    (tmp_path / "shot.png").write_bytes(PNG)
    content = _answered(fake, ["Here is the page:", ImagePart.from_path(tmp_path / "shot.png")])
    assert content == [
        {"type": "text", "text": "Here is the page:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}},
    ]


def test_pdf_bytes_from_a_tool_become_a_document(fake: FakeClaude) -> None:
    document = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)}}
    assert _answered(fake, PDF) == [document]


def test_other_bytes_from_a_tool_are_named_not_a_crash(fake: FakeClaude) -> None:
    content = _answered(fake, b"\x00\x01\xfe binary", is_error=True)  # an error result the model reads
    assert "returned a bytes value of 10 bytes, neither UTF-8 text nor an image" in content


def test_user_turns_carry_images_and_documents_by_path_bytes_and_url(fake: FakeClaude, tmp_path: Path) -> None:
    (tmp_path / "report.pdf").write_bytes(PDF)
    parts = (
        TextPart(text="What do these show?"),
        ImagePart.from_bytes(PNG),
        ImagePart(url="https://img.example/chart.png"),
        DocumentPart.from_path(tmp_path / "report.pdf"),
        DocumentPart(text="Plain notes.", title="notes"),
    )
    fake.script.append(message(text("A chart and a report.")))

    async def go() -> str:
        async with anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="k") as client:
            model = AnthropicModel("claude-sonnet-5-5", client=client, cache=None)
            reply = await model.complete(ModelRequest(messages=[Message(role="user", parts=parts)]))
            return reply.text

    assert asyncio.run(go()) == "A chart and a report."
    assert fake.requests[0]["messages"][0]["content"] == [
        {"type": "text", "text": "What do these show?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}},
        {"type": "image", "source": {"type": "url", "url": "https://img.example/chart.png"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)},
            "title": "report.pdf",
        },
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "Plain notes."},
            "title": "notes",
        },
    ]
    with pytest.raises(ValueError, match="not a PNG, JPEG, GIF or WebP image"):
        ImagePart.from_bytes(b"hello")
