"""Values the hack/ scripts compute (hack/lib.sh), read by running the same shell code."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def lib_variable(variable: str) -> str:
    """A variable of hack/lib.sh (ports, folders), computed the way the hack/ scripts compute it:
    the GRPO_* environment of the test run applies."""
    out = subprocess.run(
        ["bash", "-c", f'. hack/lib.sh && printf %s "${variable}"'],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


@functools.cache
def kind_variable(variable: str) -> str:
    """A variable of hack/kind-lib.sh (the kind backend's folders), computed as hack/kind-up.sh does."""
    out = subprocess.run(
        ["bash", "-c", f'. hack/lib.sh && . hack/kind-lib.sh && printf %s "${variable}"'],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout
