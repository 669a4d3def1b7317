"""Every check of the adapter kit (``CHECKS``) is described on the reference page and named in
docs/design.md's "Adapters and integrations", and neither names a check that is not there."""

from __future__ import annotations

import re

from loopwright.testing.adapter_checks import CHECKS
from tests import ROOT
from tests.docs.test_design_map import section

REFERENCE = (ROOT / "docs" / "reference" / "adapters.md").read_text(encoding="utf-8")


def test_the_reference_page_describes_every_check() -> None:
    rows = re.findall(r"^\| `(\w+)` \| (.+) \|$", REFERENCE, re.M)
    described = [name for name, what in rows if what.strip()]
    assert described == list(CHECKS), (
        f"docs/reference/adapters.md's tables of checks {described} are not CHECKS {list(CHECKS)}: "
        "give each check a row, in CHECKS' order"
    )


def test_the_design_map_names_every_check() -> None:
    adapters = section("## Adapters and integrations")
    named = [name for name in re.findall(r"`(\w+)`", adapters) if name in CHECKS or "_" in name]
    assert named == list(CHECKS), f"docs/design.md's adapters section names {named}, CHECKS is {list(CHECKS)}"
