"""Generated workflow trees (sequential, parallel, loop and map over scripted agents) always end
within the bounds of every level, every child's tool calls answered exactly once."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from loopwright.testing.workflow_strategies import TreeSpec, run_and_check, workflow_trees


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workflow_trees())
def test_generated_trees_end_within_their_bounds(tree: TreeSpec) -> None:
    run_and_check(tree)
