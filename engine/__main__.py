"""``python -m loopwright``: the ``loopwright`` command (:mod:`loopwright.cli.app`)."""

from .cli.app import main

raise SystemExit(main())
