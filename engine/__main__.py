"""``python -m loopwright``: the ``loopwright`` command (:mod:`loopwright.cli`)."""

from .cli import main

raise SystemExit(main())
