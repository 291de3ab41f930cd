"""`benchmarks.flash_attn_build`: the narrowed flash-attn build for the lent H200.

The build keeps the 12 kernel files of head dimensions 64 and 128 in bf16 out of 72, and narrows the
two dispatch switches to them; a kept kernel that the switch cannot reach, or a switch that reaches
a dropped one (a link error after minutes of nvcc on the GPU machine), is what these tests catch
here. The fragments below have the shape of flash-attn 2.8.3's `setup.py` source list and
`static_switch.h` macros (one source per line; a macro continued with backslashes up to `}()`).
"""

from __future__ import annotations

from types import ModuleType

import pytest

from benchmarks import flash_attn_build

KINDS = ("fwd", "fwd_split", "bwd")
DIMS = (32, 64, 96, 128, 192, 256)


@pytest.fixture
def build() -> ModuleType:
    return flash_attn_build


def setup_py() -> str:
    lines = ["    ext_modules.append(\n", "        CUDAExtension(\n", "            sources=[\n"]
    lines.append('                "csrc/flash_attn/flash_api.cpp",\n')
    for kind in KINDS:
        for causal in ("", "_causal"):
            for dim in DIMS:
                for dtype in ("fp16", "bf16"):
                    lines.append(
                        f'                "csrc/flash_attn/src/flash_{kind}_hdim{dim}_{dtype}{causal}_sm80.cu",\n'
                    )
    lines.append("            ],\n")
    return "".join(lines)


def switch(name: str, args: str, branches: list[str]) -> str:
    body = "".join(f"    {line} \\\n" for line in branches)
    return f"#define {name}({args}) \\\n  [&] {{ \\\n{body}  }}()\n"


def static_switch_h() -> str:
    bool_switch = switch(
        "BOOL_SWITCH",
        "COND, CONST_NAME, ...",
        ["if (COND) {", "  constexpr static bool CONST_NAME = true;", "  return __VA_ARGS__();", "} else {",
         "  constexpr static bool CONST_NAME = false;", "  return __VA_ARGS__();", "}"],
    )  # fmt: skip
    fp16 = switch(
        "FP16_SWITCH",
        "COND, ...",
        ["if (COND) {", "  using elem_type = cutlass::half_t;", "  return __VA_ARGS__();", "} else {",
         "  using elem_type = cutlass::bfloat16_t;", "  return __VA_ARGS__();", "}"],
    )  # fmt: skip
    dims = []
    for i, dim in enumerate(DIMS):
        dims += [f"{'} else ' if i else ''}if (HEADDIM <= {dim}) {{", f"  constexpr static int kHeadDim = {dim};",
                 "  return __VA_ARGS__();"]  # fmt: skip
    headdim = switch("HEADDIM_SWITCH", "HEADDIM, ...", [*dims, "}"])
    return f"#pragma once\n\n{bool_switch}\n{fp16}\n{headdim}"


def test_the_build_keeps_the_twelve_kernels_of_64_and_128_in_bf16(build: ModuleType) -> None:
    narrowed = build.narrow_sources(setup_py())
    kept = [line.strip().strip('",') for line in narrowed.splitlines() if ".cu" in line]
    assert len(kept) == 12
    assert all("_bf16" in name and ("_hdim64_" in name or "_hdim128_" in name) for name in kept)
    assert {name.split("_hdim")[0] for name in kept} == {f"csrc/flash_attn/src/flash_{k}" for k in KINDS}
    assert '"csrc/flash_attn/flash_api.cpp",' in narrowed  # the host code stays
    assert narrowed.endswith("            ],\n")


def test_a_source_list_of_another_shape_stops_the_build(build: ModuleType) -> None:
    without_split = "".join(line for line in setup_py().splitlines(keepends=True) if "fwd_split" not in line)
    with pytest.raises(SystemExit, match="layout changed"):
        build.narrow_sources(without_split)
    with pytest.raises(SystemExit, match="layout changed"):
        build.narrow_sources("setup(name='flash_attn')\n")


def test_the_switches_reach_only_the_kept_kernels(build: ModuleType) -> None:
    narrowed = build.narrow_switches(static_switch_h())
    assert "cutlass::half_t" not in narrowed
    assert "bf16 kernels only" in narrowed
    dims = [int(line.split("=")[1].strip(" ;\\")) for line in narrowed.splitlines() if "kHeadDim =" in line]
    assert dims == [64, 128]
    assert "HEADDIM > 32 && HEADDIM <= 128" in narrowed
    # The other switches are left as they were, and each macro still ends its lambda.
    assert "constexpr static bool CONST_NAME = true;" in narrowed
    assert narrowed.count("}()") == 3
    for line in narrowed.splitlines():
        if line.startswith(("#define FP16_SWITCH", "#define HEADDIM_SWITCH")) or line.startswith("    "):
            assert line.endswith("\\"), line  # every line of a macro but its last continues it


def test_a_header_without_the_switches_stops_the_build(build: ModuleType) -> None:
    with pytest.raises(SystemExit, match="no FP16_SWITCH"):
        build.narrow_switches("#pragma once\n")
