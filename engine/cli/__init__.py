"""The top floor, tools for people: the ``loopwright`` command (:mod:`~loopwright.cli.app`) and what
it runs (``run``, ``runs``, ``trace``, ``demo``, the live view).

``loopwright.cli:main`` is the console script's entry point.
"""

from .app import main

__all__ = ["main"]
