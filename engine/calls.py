"""The old path of :mod:`loopwright.runtime.calls` (the same module object, kept for existing imports)."""

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from loopwright.runtime.calls import *  # noqa: F403
else:
    import importlib

    sys.modules[__name__] = importlib.import_module("loopwright.runtime.calls")
