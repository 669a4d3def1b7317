"""``python -m loopwright.cli``: the ``loopwright`` command."""

from .app import main

raise SystemExit(main())
