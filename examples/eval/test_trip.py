"""The worked eval set under pytest: one test per case (``pytest examples/eval/test_trip.py``)."""

from __future__ import annotations

from pathlib import Path

from trip_agent import agent, judge

from loopwright.eval import pytest_cases

test_trip = pytest_cases(Path(__file__).parent / "trip.yaml", agent=agent, judge=judge)
