"""Write the values table of charts/grpo-operator/README.md from values.yaml, its one source.

Every key of values.yaml carries a `# -- ` comment (continued on the `#` lines after it) that
says what it does; this script turns them, with each key's type and default, into the table
between the README's `values:start` and `values:end` markers. A key documented with `# --` is
one row, whatever its value (a map of resources, a list of tolerations); an undocumented map is
a group whose keys are rows of their own.

    python charts/readme.py           # rewrite the table
    python charts/readme.py --check   # exit 1 when the README is out of date (a unit test runs this)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parent / "grpo-operator"
START, END = "<!-- values:start -->", "<!-- values:end -->"
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):(?:\s|$)")


def documented_keys(text: str) -> dict[str, str]:
    """Dotted key -> its `# --` description, in file order."""
    docs: dict[str, str] = {}
    path: list[tuple[int, str]] = []
    pending: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# --"):
            pending = [stripped[4:].strip()]
            continue
        if stripped.startswith("#"):
            if pending is not None:
                pending.append(stripped[1:].strip())
            continue
        match = _KEY.match(line)
        if not match or stripped.startswith("-"):
            if not stripped:
                pending = None
            continue
        indent = len(match["indent"])
        while path and path[-1][0] >= indent:
            path.pop()
        path.append((indent, match["key"]))
        if pending is not None:
            docs[".".join(key for _, key in path)] = " ".join(pending)
            pending = None
    return docs


def _lookup(values: dict[str, Any], dotted: str) -> Any:
    node: Any = values
    for part in dotted.split("."):
        node = node[part]
    return node


def _type(value: Any) -> str:
    if value is None:
        return "string or null"
    return {bool: "bool", int: "int", float: "float", str: "string", list: "list", dict: "map"}[type(value)]


def _default(value: Any) -> str:
    text = json.dumps(value, separators=(", ", ": "))
    return "`" + text.replace("|", "\\|") + "`"


def rows(values_text: str) -> list[str]:
    values = yaml.safe_load(values_text)
    docs = documented_keys(values_text)
    out = ["| Key | Type | Default | Description |", "| --- | --- | --- | --- |"]

    def walk(node: dict[str, Any], prefix: str) -> None:
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if dotted in docs or not isinstance(value, dict) or not value:
                description = docs.get(dotted, "").replace("|", "\\|")
                out.append(f"| `{dotted}` | {_type(value)} | {_default(value)} | {description} |")
            else:
                walk(value, f"{dotted}.")

    walk(values, "")
    return out


def render(readme: str, values_text: str) -> str:
    before, _, rest = readme.partition(START)
    _, _, after = rest.partition(END)
    if not rest:
        raise SystemExit(f"{CHART / 'README.md'} has no {START} marker")
    return before + START + "\n" + "\n".join(rows(values_text)) + "\n" + END + after


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the README is out of date")
    args = parser.parse_args(argv)
    readme_path = CHART / "README.md"
    current = readme_path.read_text(encoding="utf-8")
    wanted = render(current, (CHART / "values.yaml").read_text(encoding="utf-8"))
    if args.check:
        if current != wanted:
            print(f"{readme_path} is out of date: run python charts/readme.py", file=sys.stderr)
            return 1
        return 0
    readme_path.write_text(wanted, encoding="utf-8")
    print(f"wrote {readme_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
