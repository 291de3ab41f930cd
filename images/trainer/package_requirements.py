"""Print the requirements of the project's package and the extras named, from pyproject.toml alone.

The trainer images install these in a layer of their own before any of the project's code is
copied into the build: a change to `operator/` or `trainer/` then rebuilds (and a node then
imports) only the small layer of the package itself, installed with `--no-deps` on top, not the
gigabytes of its dependencies. Standard library only: it runs in the image's bare virtualenv.

    python package_requirements.py pyproject.toml trainer     # base dependencies + [trainer]

Extras that name the project itself (`grpo-operator[trainer]` inside another extra) are expanded.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

# A requirement's name and its extras: "grpo-operator[trainer,plugin]>=1" -> name, "trainer,plugin".
_SELF = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(pyproject: dict, extras: list[str]) -> list[str]:
    """The package's own dependencies and those of `extras`, in order, each once."""
    project = pyproject["project"]
    own = _canonical(project["name"])
    optional = project.get("optional-dependencies", {})
    found: list[str] = []
    seen_extras: set[str] = set()

    def add(lines: list[str]) -> None:
        for line in lines:
            match = _SELF.match(line)
            if match and _canonical(match.group(1)) == own:
                for extra in (match.group(2) or "").split(","):
                    expand(extra.strip())
            elif line not in found:
                found.append(line)

    def expand(extra: str) -> None:
        if not extra or extra in seen_extras:
            return
        if extra not in optional:
            raise SystemExit(f"package_requirements.py: pyproject.toml has no extra '{extra}'")
        seen_extras.add(extra)
        add(optional[extra])

    add(project.get("dependencies", []))
    for extra in extras:
        expand(extra)
    return found


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: package_requirements.py PYPROJECT [EXTRA...]", file=sys.stderr)
        return 2
    with Path(argv[0]).open("rb") as handle:
        pyproject = tomllib.load(handle)
    print("\n".join(requirements(pyproject, argv[1:])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
