"""Stand-ins for the CUDA libraries PyPI's Linux torch links against, for the CPU trainer image.

PyPI has no CPU-only torch for Linux x86-64 (PyTorch's CPU index is not reachable from the
machines that build our images), and its torch wheel links `libtorch_cuda.so` and friends against
CUDA's libraries (cuBLAS, cuDNN, NCCL, ...), which arrive as `nvidia-*` packages: 2.7 GB of
the CPU image's 6 GB, with `triton` (0.6 GB) beside them, none of it ever run on CPU.

So the CPU image deletes them and puts in their place, in `torch/lib` (on every torch library's
`$ORIGIN` rpath), one small library per missing soname that defines every symbol torch imports
from it, each one a function returning 100 (`cudaErrorNoDevice`). torch binds functions lazily,
so none is called unless CUDA work is asked for, and the first call torch makes,
`cudaGetDeviceCount`, gets "no device": `torch.cuda.is_available()` is False and torch runs as a
CPU build does. Where a CPU build has no CUDA function at all and this one calls one anyway (a
library asking `torch.cuda.is_current_stream_capturing()`), the call fails as CUDA calls fail on
a machine without a GPU, with a message from the library's error-string function: those return a
string (100 returned as a string pointer crashed the process), and torch raises a RuntimeError
the caller can catch. Symbol versions are kept (torch's libraries ask for `libcudart.so.13` and the
like by version node), read from the libraries' own dynamic symbol tables, so a torch upgrade
needs no edit here; a symbol no family below claims fails the build instead of being guessed.

    python cuda_stubs.py SITE_PACKAGES      # after the nvidia-* packages are removed

Needs `readelf` (binutils) and a C compiler; uses the standard library only.
"""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

STUB_RETURN = 100
"""cudaErrorNoDevice: what a CPU machine's CUDA runtime answers."""

UNVERSIONED = (
    # Libraries that export their symbols without a version node, by their symbols' prefixes:
    # the more specific prefix first (cuFile before the driver's `cu`).
    ("libcufile.so.0", ("cuFile",)),
    ("libcusparseLt.so.0", ("cusparseLt",)),
    ("libcurand.so.10", ("curand",)),
    ("libnccl.so.2", ("nccl",)),
    ("libnvshmem_host.so.3", ("nvshmem",)),
    ("libcuda.so.1", ("cu",)),
)
VERSION_NODES = {"libnvshmem_host.so.3": "NVSHMEM"}
"""Libraries whose version node is not their soname."""
MESSAGE = "no CUDA in this image (the CPU trainer image)"
"""What the error-string functions answer."""
STRING_RESULT = re.compile(r"(Error|Status)(String|Name)$|^ncclGetLastError$")
"""Functions that return a `const char *` (cudaGetErrorString, cublasGetStatusString, ...)."""
STRING_OUT = {"cuGetErrorString", "cuGetErrorName", "cuptiGetResultString"}
"""Functions that write a `const char *` through their second argument and return a status."""
SYSTEM_DIRS = (
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
)


def readelf(*args: str) -> str:
    return subprocess.run(["readelf", *args], capture_output=True, text=True, check=True).stdout


def needed(library: Path) -> set[str]:
    return set(re.findall(r"\(NEEDED\).*\[(.+?)\]", readelf("-d", str(library))))


def dynamic_symbols(library: Path) -> list[tuple[str, str, str]]:
    """(name, version node or '', section index: `UND` when undefined) of each dynamic symbol."""
    symbols = []
    for line in readelf("--dyn-syms", "-W", str(library)).splitlines():
        fields = line.split()
        if len(fields) >= 8 and fields[6] != "Ndx" and fields[7]:
            name, _, version = fields[7].partition("@")
            symbols.append((name, version.split(" ")[0].lstrip("@"), fields[6]))
    return symbols


def undefined(library: Path) -> dict[str, str]:
    """Symbol -> version node ('' when unversioned) of every undefined dynamic symbol."""
    return {name: version for name, version, index in dynamic_symbols(library) if index == "UND"}


def missing_libraries(libraries: list[Path], here: Path, search: tuple[str, ...]) -> list[str]:
    """The sonames the libraries need that neither their folder nor the system provides."""
    wanted = set().union(*(needed(library) for library in libraries))
    return sorted(
        name
        for name in wanted
        if not (here / name).exists() and not any(Path(d, name).exists() for d in search)
    )


def assign(symbols: dict[str, str], missing: list[str]) -> dict[str, tuple[str, list[str], list[str]]]:
    """Each missing soname -> (version node, versioned symbols, unversioned symbols)."""
    plan: dict[str, tuple[str, list[str], list[str]]] = {}
    for soname in missing:
        node = VERSION_NODES.get(soname, soname)
        plan[soname] = (node, sorted(s for s, v in symbols.items() if v == node), [])
    for symbol, version in sorted(symbols.items()):
        if version:
            continue
        for soname, prefixes in UNVERSIONED:
            if soname in plan and symbol.startswith(prefixes):
                plan[soname][2].append(symbol)
                break
    return plan


def unclaimed(
    symbols: dict[str, str], plan: dict[str, tuple[str, list[str], list[str]]], defined: set[str]
) -> list[str]:
    """Unversioned CUDA symbols no present library defines and no stand-in will: they would fail
    at load or at their first call."""
    # A versioned symbol of a missing library is always stubbed (`assign` takes them all).
    known = defined.union(*(plain for _, _, plain in plan.values()))
    return sorted(s for s, v in symbols.items() if not v and _cuda_like(s) and s not in known)


def _cuda_like(symbol: str) -> bool:
    return symbol.startswith(("cu", "nccl", "nvshmem", "nvrtc"))


def build(soname: str, node: str, versioned: list[str], plain: list[str], out: Path, compiler: str) -> None:
    with tempfile.TemporaryDirectory() as work:
        source = Path(work, "stub.c")
        lines = [
            f'static const char grpo_cuda_message[] = "{MESSAGE}";',
            f"int grpo_cuda_stub(void) {{ return {STUB_RETURN}; }}",
            "const char *grpo_cuda_string(void) { return grpo_cuda_message; }",
            "int grpo_cuda_string_out(int code, const char **text) { if (text) *text = grpo_cuda_message; return 0; }",
        ]
        for symbol in (*versioned, *plain):
            lines.append(
                f'__asm__(".globl {symbol}\\n.type {symbol}, @function\\n.set {symbol}, {_target(symbol)}");'
            )
        source.write_text("\n".join(lines) + "\n", encoding="utf-8")
        flags = [f"-Wl,-soname,{soname}"]
        if versioned:
            script = Path(work, "stub.map")
            script.write_text(
                f"{node} {{ global: {' '.join(s + ';' for s in versioned)} }};\n", encoding="utf-8"
            )
            flags.append(f"-Wl,--version-script={script}")
        subprocess.run(
            [compiler, "-shared", "-fPIC", "-O1", *flags, "-o", str(out / soname), str(source)], check=True
        )


def _target(symbol: str) -> str:
    """The stand-in a symbol gets: a string for an error-string function, else the status 100."""
    if symbol in STRING_OUT:
        return "grpo_cuda_string_out"
    if STRING_RESULT.search(symbol):
        return "grpo_cuda_string"
    return "grpo_cuda_stub"


def defined_symbols(paths: list[Path]) -> set[str]:
    return {name for path in paths for name, _, index in dynamic_symbols(path) if index != "UND"}


def stub_torch(
    site_packages: Path, *, compiler: str = "cc", search: tuple[str, ...] = SYSTEM_DIRS
) -> list[str]:
    """Write the stand-ins into `site_packages/torch/lib`; return the sonames stubbed."""
    here = site_packages / "torch" / "lib"
    libraries = sorted(p for p in here.glob("*.so*") if p.is_file()) + sorted(
        (site_packages / "torch").glob("_C*.so")
    )
    return stub_folder(here, libraries, compiler=compiler, search=search)


def stub_folder(
    here: Path, libraries: list[Path], *, compiler: str = "cc", search: tuple[str, ...] = SYSTEM_DIRS
) -> list[str]:
    """Stand-ins in `here` for what `libraries` need and nothing provides (`stub_torch`'s core)."""
    missing = missing_libraries(libraries, here, search)
    symbols: dict[str, str] = {}
    for library in libraries:
        for name, version in undefined(library).items():
            symbols.setdefault(name, version)
    plan = assign(symbols, missing)
    present = [p for p in here.glob("*.so*") if p.is_file()] + [Path(sys.executable).resolve()]
    libpython = Path(sysconfig.get_config_var("LIBDIR") or "/", sysconfig.get_config_var("LDLIBRARY") or "-")
    if libpython.is_file():
        present.append(libpython)
    left = unclaimed(symbols, plan, defined_symbols(present))
    if left:
        raise SystemExit(
            f"cuda_stubs: no stand-in would define {', '.join(left[:10])} (a new CUDA library? add its family)"
        )
    for soname, (node, versioned, plain) in plan.items():
        build(soname, node, versioned, plain, here, compiler)
    return sorted(plan)


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.splitlines()[0] + "\nusage: python cuda_stubs.py SITE_PACKAGES")
    stubbed = stub_torch(Path(sys.argv[1]))
    print(f"cuda_stubs: {len(stubbed)} stand-ins in torch/lib: {' '.join(stubbed)}")


if __name__ == "__main__":
    main()
