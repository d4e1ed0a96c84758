"""``python -m gatherx``: the command line."""

from .cli import main

raise SystemExit(main())
