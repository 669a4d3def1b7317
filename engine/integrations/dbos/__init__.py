"""Runs on DBOS workers (public; the dbos extra). The modules inside are private."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...data.exports import lazy_exports as _lazy_exports

_EXPORTS = {
    "APP": ".runner",
    "CANCEL": ".runner",
    "Client": ".runner",
    "QUEUE": ".runner",
    "RESULT": ".runner",
    "ReplayDivergence": ".runner",
    "STATUS": ".runner",
    "STEP": ".runner",
    "TOPIC": ".runner",
    "WORKFLOW": ".runner",
    "decode_decisions": ".runner",
    "encode_decisions": ".runner",
    "launch": ".runner",
    "recover_dead": ".runner",
    "register": ".runner",
    "replay": ".runner",
    "result": ".runner",
    "result_from_json": ".runner",
    "run": ".runner",
    "run_workflow": ".runner",
    "runner_for": ".runner",
    "stage_step": ".runner",
    "start": ".runner",
    "worker_main": ".runner",
    "worker_parser": ".runner",
    "write_ahead": ".runner",
}

__all__ = [
    "APP",
    "CANCEL",
    "QUEUE",
    "RESULT",
    "STATUS",
    "STEP",
    "TOPIC",
    "WORKFLOW",
    "Client",
    "ReplayDivergence",
    "decode_decisions",
    "encode_decisions",
    "launch",
    "recover_dead",
    "register",
    "replay",
    "result",
    "result_from_json",
    "run",
    "run_workflow",
    "runner_for",
    "stage_step",
    "start",
    "worker_main",
    "worker_parser",
    "write_ahead",
]

if TYPE_CHECKING:
    from .runner import APP as APP
    from .runner import CANCEL as CANCEL
    from .runner import QUEUE as QUEUE
    from .runner import RESULT as RESULT
    from .runner import STATUS as STATUS
    from .runner import STEP as STEP
    from .runner import TOPIC as TOPIC
    from .runner import WORKFLOW as WORKFLOW
    from .runner import Client as Client
    from .runner import ReplayDivergence as ReplayDivergence
    from .runner import decode_decisions as decode_decisions
    from .runner import encode_decisions as encode_decisions
    from .runner import launch as launch
    from .runner import recover_dead as recover_dead
    from .runner import register as register
    from .runner import replay as replay
    from .runner import result as result
    from .runner import result_from_json as result_from_json
    from .runner import run as run
    from .runner import run_workflow as run_workflow
    from .runner import runner_for as runner_for
    from .runner import stage_step as stage_step
    from .runner import start as start
    from .runner import worker_main as worker_main
    from .runner import worker_parser as worker_parser
    from .runner import write_ahead as write_ahead

__getattr__, __dir__ = _lazy_exports(__name__, _EXPORTS)
