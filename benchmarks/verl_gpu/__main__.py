"""`python -m benchmarks.verl_gpu VERB ...`: the package's docstring says what each verb does."""

import sys

from .cli import main

sys.exit(main())
