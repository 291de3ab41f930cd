"""`python -m grpo_operator`."""

from .cli import main

raise SystemExit(main())
