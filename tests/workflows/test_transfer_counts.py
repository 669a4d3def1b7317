"""A transfer into a workflow: ``result.iterations`` equals the model passes made (counted
inside the models), and a run that ends ``limit`` there says which budget it spent (issue 37:
"the counters equal what was done"). Before, the run's turn the workflow answered counted as a
pass of its own (max_iterations=4: 2 model calls made, ``iterations`` 3), and the last message
was the workflow's "did not finish (limit): out of budget (max_iterations)"."""

from __future__ import annotations

import pytest

from loopwright import Limits, Runner
from tests.workflows.test_budgets_exact import _transfer_root


@pytest.mark.parametrize("passes", [2, 3, 4, 5, 6])
def test_a_transfer_whose_workflow_runs_out_counts_what_was_made_and_says_the_budget(passes: int) -> None:
    root, models = _transfer_root(9, Limits(max_iterations=passes, salvage=False))
    result = Runner(root).run_sync("go")
    made = sum(m.passes for m in models)
    assert result.iterations == made, (result.iterations, [m.passes for m in models])
    assert made == passes - 1  # the transfer's reply, and the leaf's: the workflow holds one pass while it runs
    assert result.outcome == "limit" and result.limit == "max_iterations", (result.outcome, result.limit)
    last = result.messages[-1].text
    assert "max_iterations" in last and "ends 'limit'" in last, last
    assert "did not finish (limit)" not in last


@pytest.mark.parametrize("leaf", [1, 2, 3])
def test_a_transfer_whose_workflow_answers_counts_what_was_made(leaf: int) -> None:
    root, models = _transfer_root(leaf, Limits(max_iterations=8))
    result = Runner(root).run_sync("go")
    assert result.outcome == "final", (result.outcome, result.error)
    assert [m.passes for m in models] == [1, leaf]
    assert result.iterations == 1 + leaf
