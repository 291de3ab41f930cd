from __future__ import annotations

from pathlib import Path

import pytest
from support.helm import notes_chart


@pytest.fixture(scope="session")
def notes_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return notes_chart(tmp_path_factory.mktemp("chart"))
