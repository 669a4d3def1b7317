"""The old path of :mod:`loopwright.loop.runner` (the same module object, kept for existing imports)."""

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from loopwright.loop.runner import *  # noqa: F403
else:
    import importlib

    sys.modules[__name__] = importlib.import_module("loopwright.loop.runner")
