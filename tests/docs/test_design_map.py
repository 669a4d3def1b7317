"""docs/design.md is a true map: its floors are ``FLOORS``, its public modules are ``PUBLIC``, and every
name its one-run walk gives exists."""

from __future__ import annotations

import importlib
import re

from loopwright.data.exports import PUBLIC
from tests import ROOT
from tests.layout.test_layering import FLOORS

DESIGN = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    start = DESIGN.index(title)
    end = DESIGN.find("\n#", start + len(title))
    return DESIGN[start : end if end != -1 else None]


def resolve(dotted: str) -> object:
    """The object ``dotted`` names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            value = getattr(value, attribute)
        return value
    raise ImportError(dotted)


def test_the_floors_are_the_ones_the_layering_test_enforces() -> None:
    layout = section("## Layout: a public skin over private floors")
    assert re.findall(r"^\d+\. `(\w+)`", layout, re.M) == FLOORS


def test_the_public_modules_are_the_declared_ones() -> None:
    layout = section("## Layout: a public skin over private floors")
    listed = {m for line in re.findall(r"^- (.+) — ", layout, re.M) for m in re.findall(r"`(loopwright[\w.]*)`", line)}
    assert listed == set(PUBLIC)


def test_every_name_of_the_walk_exists() -> None:
    walk = section("### One run, walked")
    names = re.findall(r"`(loopwright\.[\w.]+)`", walk)
    assert len(names) >= 10
    for name in names:
        assert resolve(name) is not None, name


PICTURED = {
    "Runner.run": "loopwright.Runner.run",
    "Run.steps": "loopwright.Run.steps",
    "Run.choose": "loopwright.Run.choose",
    "Run.take": "loopwright.Run.take",
    "LoopMachine.choose": "loopwright.extend.LoopMachine.choose",
}


def test_the_picture_names_what_exists() -> None:
    picture = section("## The architecture in one picture")
    for name, dotted in PICTURED.items():
        assert name in picture and resolve(dotted) is not None, name
    paths = re.findall(r"\((engine/[\w/.]+|states/[\w/*.]+)", picture)
    assert paths
    for path in paths:
        assert list(ROOT.glob(path.rstrip("/"))), path
