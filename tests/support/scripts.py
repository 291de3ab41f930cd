"""The repository's scripts that are not modules of a package (benchmarks, the image lock, the
chart's hook), imported by the unit tests that check them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str) -> ModuleType:
    """`path` imported as module `name`, afresh on every call. It is registered in `sys.modules`
    before it runs: a dataclass in it looks its own module up there."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
