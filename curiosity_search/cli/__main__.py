"""``python -m curiosity_search.cli``: the ``curiosity-search`` command."""

from curiosity_search.cli import main

raise SystemExit(main())
