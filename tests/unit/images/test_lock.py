"""images/trainer/cuda.lock: the CUDA image's whole Python resolution, and the one source of the
versions that Dockerfile.cuda installs and that the GPU benchmarks carry
(benchmarks/gpu_stack_requirements.txt).

The slow tests ask pip's resolver (PyPI, wheels only, nothing downloaded beyond metadata) whether
the images that these machines cannot build still resolve for their platforms: the CUDA image on
x86-64 (to exactly the lock) and aarch64, the Ascend image on both.
"""

from __future__ import annotations

import re

import pytest
from packaging.utils import canonicalize_name
from support.dockerfile import DOCKERFILES, REPO, Dockerfile, build_args
from support.scripts import load_script

lock = load_script(REPO / "images" / "lock.py", "lock")

GPU_STACK = REPO / "benchmarks" / "gpu_stack_requirements.txt"


def _pins(text: str) -> dict[str, str]:
    pins = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"not a pin: {raw!r}"
            pins[canonicalize_name(name)] = version.strip()
    return pins


def test_the_gpu_benchmarks_carry_the_images_versions() -> None:
    """The H200 runs test the image's stack: every package they carry is the lock's, at its version."""
    locked = lock.read_lock()
    carried = _pins(GPU_STACK.read_text())
    differ = {
        name: (version, locked.get(name)) for name, version in carried.items() if locked.get(name) != version
    }
    assert not differ, f"gpu_stack_requirements.txt (version, lock's version): {differ}"
    assert carried["bitsandbytes"] == build_args("cuda")["BITSANDBYTES_VERSION"]


def test_the_lock_holds_every_version_the_cuda_image_pins() -> None:
    locked = lock.read_lock()
    for name, version in lock.pins("cuda").items():
        if name in lock.SOURCE_BUILT:
            assert name not in locked, f"{name} is built from source in the image, not resolved"
            continue
        assert locked.get(name) == version, (
            f"versions.env pins {name}=={version}, the lock {locked.get(name)}"
        )
    assert lock.LOCK.read_text().startswith("# Every Python package of the CUDA trainer image")


def test_every_install_in_the_cuda_dockerfile_is_under_the_lock() -> None:
    dockerfile = Dockerfile.read(DOCKERFILES["cuda"])
    assert any(c.sources == ("images/trainer/cuda.lock",) for c in dockerfile.copies())
    installs = [
        command
        for run in dockerfile.all("RUN")
        for command in re.split(r"&&|;", run.arguments)
        if re.search(r"\bpip install\b", command)
    ]
    assert len(installs) >= 5
    # The project's own wheel goes in offline and without dependencies: it can move no pin.
    own_wheel = [c for c in installs if "--no-deps --no-index /opt/grpo/dist/" in c]
    assert own_wheel
    for command in installs:
        if command in own_wheel:
            continue
        assert "-c /opt/cuda.lock" in command, f"not under the lock: {command.strip()}"


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    ("image", "arch"), [("cuda", "x86_64"), ("cuda", "aarch64"), ("ascend", "x86_64"), ("ascend", "aarch64")]
)
def test_the_images_python_layers_resolve_for_their_platform(image: str, arch: str) -> None:
    """pip's resolver finds the image's Python layer for its Python on manylinux `arch`; for the
    CUDA image on x86-64 that answer is the lock itself (`python images/lock.py write` refreshes it)."""
    lock.check(image, arch)
