"""Structured logs: one record per transition and per tool call, quiet by default, no secrets."""

from __future__ import annotations

import io
import json

from loopwright import Runner, ToolCall, configure_logging
from loopwright.runtime.log import redact_secrets
from tests.helpers import agent


def test_quiet_by_default(capsys: object) -> None:
    Runner(agent(["hi"])).run_sync("go")
    captured = capsys.readouterr()  # type: ignore[attr-defined]
    assert captured.out == "" and captured.err == ""


def test_json_records_explain_each_transition() -> None:
    out = io.StringIO()
    configure_logging("json", stream=out)
    try:
        Runner(agent([[ToolCall(name="add", args={"a": 1, "b": 2})], "three"])).run_sync("go", run_id="log-run")
    finally:
        configure_logging("off")
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    transitions = [r for r in records if r["event"] == "transition"]
    decide_done = transitions[-1]
    assert decide_done["from"] == "decide" and decide_done["to"] == "done"
    assert decide_done["guard"] == "is_final_response" and decide_done["run_id"] == "log-run"
    assert decide_done["rejected"] == ["decide -> cancelled (cancel_requested)"]
    (tool_record,) = [r for r in records if r["event"] == "tool_call"]
    assert tool_record["tool"] == "add" and tool_record["is_error"] is False
    assert records[-1]["event"] == "run_finished" and records[-1]["outcome"] == "final"


def test_secrets_never_reach_a_record() -> None:
    record = redact_secrets(
        None,
        "info",
        {
            "api_key": "sk-ant-abcdef1234567890",
            "note": "header was Bearer abcdefghijklmnop and key sk-ant-api03-XYZXYZXYZXYZ",
            "nested": {"password": "hunter2", "ok": "fine"},
        },
    )
    assert record["api_key"] == "[redacted]"
    assert record["note"] == "header was [redacted] and key [redacted]"
    assert record["nested"] == {"password": "[redacted]", "ok": "fine"}


def test_structlog_mode_uses_the_apps_configuration_with_secrets_redacted() -> None:
    import structlog

    captured: list[dict[str, object]] = []

    def capture(_logger: object, _method: str, event_dict: dict[str, object]) -> dict[str, object]:
        captured.append(dict(event_dict))
        raise structlog.DropEvent

    structlog.configure(processors=[capture])
    configure_logging("structlog")
    try:
        from loopwright.runtime.log import get_logger

        get_logger().info("probe", token="abc", detail="key sk-ant-0123456789abcdef")
        Runner(agent(["hi"])).run_sync("go")
    finally:
        configure_logging("off")
        structlog.reset_defaults()
    assert captured[0]["token"] == "[redacted]" and captured[0]["detail"] == "key [redacted]"
    assert any(r["event"] == "transition" for r in captured)
