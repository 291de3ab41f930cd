"""images/trainer/cuda_stubs.py: stand-ins that let a library linked against CUDA load without it.

The CPU trainer image deletes the CUDA libraries PyPI's torch links against and puts these in
their place. Here the same is done to two libraries built for the test: `libuser.so` linked
against a versioned `libfakecuda.so.13` (as torch against `libcudart.so.13`) and an unversioned
`libnccl.so.2`; the real ones are deleted, the stand-ins made, and `libuser.so` loads and gets
"no device" (100) from both, as torch does from `cudaGetDeviceCount`.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("cuda_stubs", REPO / "images" / "trainer" / "cuda_stubs.py")
assert spec
assert spec.loader
cuda_stubs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cuda_stubs)

CC = shutil.which("cc") or shutil.which("gcc")


def _cc(*args: str) -> None:
    assert CC, "a C compiler (build-essential) is part of the development machine"
    subprocess.run([CC, "-shared", "-fPIC", *args], check=True, capture_output=True)


def _libraries(folder: Path) -> Path:
    """libuser.so, needing libfakecuda.so.13 (version node libfakecuda.so.13) and libnccl.so.2."""
    (folder / "cuda.c").write_text(
        "int fakeGetDeviceCount(int *n) { *n = 1; return 0; }\n"
        'const char *fakeGetErrorString(int e) { return "real"; }\n'
    )
    (folder / "cuda.map").write_text(
        "libfakecuda.so.13 { global: fakeGetDeviceCount; fakeGetErrorString; };\n"
    )
    _cc(
        "-Wl,-soname,libfakecuda.so.13",
        f"-Wl,--version-script={folder / 'cuda.map'}",
        "-o",
        str(folder / "libfakecuda.so.13"),
        str(folder / "cuda.c"),
    )
    (folder / "nccl.c").write_text("int ncclGetVersion(int *v) { *v = 22809; return 0; }\n")
    _cc("-Wl,-soname,libnccl.so.2", "-o", str(folder / "libnccl.so.2"), str(folder / "nccl.c"))
    (folder / "user.c").write_text(
        "int fakeGetDeviceCount(int *n);\nint ncclGetVersion(int *v);\nconst char *fakeGetErrorString(int e);\n"
        "const char *message(void) { return fakeGetErrorString(100); }\n"
        "int devices(void) { int n = -1; return fakeGetDeviceCount(&n); }\n"
        "int nccl(void) { int v = -1; return ncclGetVersion(&v); }\n"
    )
    _cc(
        "-Wl,-rpath,$ORIGIN",
        "-o",
        str(folder / "libuser.so"),
        str(folder / "user.c"),
        f"-L{folder}",
        "-l:libfakecuda.so.13",
        "-l:libnccl.so.2",
    )
    return folder / "libuser.so"


def test_a_library_linked_against_cuda_loads_on_the_stand_ins_and_hears_no_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = _libraries(tmp_path)
    assert _call(user) == "0 0 real"
    for name in ("libfakecuda.so.13", "libnccl.so.2"):
        (tmp_path / name).unlink()
    assert "libfakecuda.so.13: cannot open shared object file" in _call(user)
    monkeypatch.setattr(cuda_stubs, "UNVERSIONED", (("libnccl.so.2", ("nccl",)),))
    stubbed = cuda_stubs.stub_folder(tmp_path, [user], compiler=CC)
    assert stubbed == ["libfakecuda.so.13", "libnccl.so.2"]
    # The version node is the one the user asks for, as torch asks for `libcudart.so.13`.
    assert (
        "libfakecuda.so.13"
        in subprocess.run(
            ["readelf", "-V", str(tmp_path / "libfakecuda.so.13")], capture_output=True, text=True, check=True
        ).stdout
    )
    # The error-string function answers a string: torch builds its error message from it.
    assert _call(user) == f"{cuda_stubs.STUB_RETURN} {cuda_stubs.STUB_RETURN} {cuda_stubs.MESSAGE}"


def test_a_cuda_symbol_no_family_claims_fails_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new unversioned CUDA library (a torch upgrade) is a build error naming its symbol, not a
    stand-in that lacks it and an image that fails at its first import."""
    user = _libraries(tmp_path)
    for name in ("libfakecuda.so.13", "libnccl.so.2"):
        (tmp_path / name).unlink()
    monkeypatch.setattr(cuda_stubs, "UNVERSIONED", ())
    with pytest.raises(SystemExit, match="ncclGetVersion"):
        cuda_stubs.stub_folder(tmp_path, [user], compiler=CC)


def _call(user: Path) -> str:
    """`devices() nccl() message()` from libuser.so loaded in a fresh process (the loader keeps a soname it has
    loaded once, so a second load in this one would not see the files change), or the load error."""
    script = (
        "import ctypes, sys\n"
        "try:\n    lib = ctypes.CDLL(sys.argv[1])\nexcept OSError as error:\n    print(error); sys.exit()\n"
        "lib.message.restype = ctypes.c_char_p\n"
        "print(lib.devices(), lib.nccl(), lib.message().decode())"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(user)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()
