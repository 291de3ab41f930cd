"""The images tier: the operator and CPU trainer images as built by `make images`, run as
containers by the local engine (hack/engine-up.sh). `make test-images` builds them and runs this
tier. A missing engine or image fails the tests, never skips them."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def built_tags() -> dict[str, str]:
    """images/build.sh's tag for each image it builds (read from its --dry-run)."""
    out = subprocess.run(
        ["bash", str(REPO / "images" / "build.sh"), "--dry-run", "operator", "cpu"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    tags = [shlex.split(line)[shlex.split(line).index("-t") + 1] for line in out.splitlines() if line.strip()]
    return dict(zip(["operator", "cpu"], tags, strict=True))


def docker(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        pytest.fail(f"docker {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result


@pytest.fixture(scope="session")
def images() -> dict[str, dict]:
    """Each built image's `docker image inspect`, by name (operator, cpu)."""
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        pytest.fail(
            "no container engine answers: run `make engine-up` (or `make test-images`)", pytrace=False
        )
    found = {}
    for name, tag in built_tags().items():
        result = docker("image", "inspect", tag, check=False)
        if result.returncode != 0:
            pytest.fail(f"{tag} is not built: run `make images IMAGES='operator cpu'`", pytrace=False)
        (found[name],) = json.loads(result.stdout)
    return found


def megabytes(inspect: dict) -> int:
    return round(inspect["Size"] / 1e6)


def pinned(key: str) -> str:
    text = (REPO / "images" / "versions.env").read_text()
    match = re.search(rf"^{key}=(.*)$", text, re.MULTILINE)
    assert match, key
    return match.group(1)
