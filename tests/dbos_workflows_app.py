"""The workflow agent of the DBOS kill -9 tests, registered for ``loopwright worker --app
tests.dbos_workflows_app``: ``desk`` (tests.workflow_worker's sequence whose middle step is a
parallel; ``LOOPWRIGHT_CRASH_IN`` says where the ``crash`` tool kills the worker)."""

from __future__ import annotations

from loopwright.integrations.dbos import register
from tests.workflow_worker import make_workflow

register(make_workflow())
