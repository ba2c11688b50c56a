"""``python -m constrfl``: the ``constrfl`` console script."""
from .cli import main

raise SystemExit(main())
