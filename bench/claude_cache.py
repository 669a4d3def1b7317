"""Prompt-cache reads and writes per step of a 5-step tool loop with 1, 4 and 12 parallel calls a
step, on the fake Messages API's cache accounting (20-block lookback), with one moving history
breakpoint (before) and with the second one at the previous request's end (after).
Run from the repository root: python bench/claude_cache.py"""

import sys

sys.path.insert(0, ".")
from tests.fake_claude import FakeClaude
from tests.models.anthropic.test_anthropic_caching import wide_agent
from tests.models.anthropic.test_anthropic_model import run

from loopwright.models.anthropic import mapping as m
from loopwright.models.anthropic import model as am


def old(messages, ttl):
    for turn in reversed(messages):
        for block in reversed(turn["content"]):
            if block.get("type") in m._CACHEABLE:
                block["cache_control"] = m.cache_control(ttl)
                return


new = am.mark_history
for label, fn in (("before", old), ("after", new)):
    am.mark_history = fn
    for width in (1, 4, 12):
        with FakeClaude(account=True) as fake:
            run(wide_agent(fake, 5, width))
            r = [u["cache_read_input_tokens"] for u in fake.ledger]
            w = [u["cache_creation_input_tokens"] for u in fake.ledger]
            print(f"{label:6} {width:2} calls/step: read {sum(r):6} written {sum(w):6}  per step read {r} written {w}")
