"""The old path of :mod:`loopwright.durable.trust` (the same module object, kept for existing imports)."""

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from loopwright.durable.trust import *  # noqa: F403
else:
    import importlib

    sys.modules[__name__] = importlib.import_module("loopwright.durable.trust")
