"""Just enough of a Dockerfile parser for static checks: instructions, stages, ARGs, COPYs."""

from __future__ import annotations

import itertools
import json
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "images"
VERSIONS = IMAGES / "versions.env"
BUILD = IMAGES / "build.sh"

# images/build.sh's image names and the Dockerfile each builds.
DOCKERFILES = {
    "operator": REPO / "images" / "operator" / "Dockerfile",
    "cuda": REPO / "Dockerfile.cuda",
    "ascend": REPO / "Dockerfile.ascend",
    "ascend-a2-seed": REPO / "Dockerfile.ascend",
}


@dataclass(frozen=True)
class Instruction:
    keyword: str
    arguments: str
    stage: int
    """0 for instructions before the first FROM, then 1, 2, ... per stage."""

    def exec_form(self) -> list[str]:
        """The JSON array of ENTRYPOINT/CMD, or fail for the shell form."""
        value = json.loads(self.arguments)
        assert isinstance(value, list), f"{self.keyword} is not in exec form: {self.arguments}"
        return value


@dataclass(frozen=True)
class Copy:
    sources: tuple[str, ...]
    destination: str
    flags: dict[str, str] = field(default_factory=dict)
    stage: int = 0


@dataclass
class Dockerfile:
    path: Path
    instructions: list[Instruction]

    @classmethod
    def read(cls, path: Path) -> Dockerfile:
        instructions: list[Instruction] = []
        stage = 0
        pending = ""
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if not pending and (not line or line.startswith("#")):
                continue
            if pending and line.startswith("#"):
                continue  # a comment inside a continued instruction
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            text = pending + line
            pending = ""
            keyword, _, arguments = text.partition(" ")
            keyword = keyword.upper()
            if keyword == "FROM":
                stage += 1
            instructions.append(Instruction(keyword, arguments.strip(), stage))
        assert not pending, f"{path}: ends inside a continued line"
        return cls(path, instructions)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    @property
    def stages(self) -> int:
        return max(i.stage for i in self.instructions)

    def final(self, keyword: str) -> list[Instruction]:
        return [i for i in self.all(keyword) if i.stage == self.stages]

    def stage_bases(self) -> dict[str, str]:
        """Each named stage and what its FROM names (an image, an ARG or an earlier stage)."""
        bases = {}
        for instruction in self.all("FROM"):
            words = instruction.arguments.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else str(instruction.stage)
            bases[name] = words[0]
        return bases

    def stage_number(self, name: str) -> int:
        return list(self.stage_bases()).index(name) + 1

    def lineage(self, name: str) -> list[str]:
        """The stage and every stage it is built on, nearest first."""
        bases = self.stage_bases()
        chain = [name]
        while bases[chain[-1]] in bases:
            chain.append(bases[chain[-1]])
        return chain

    def in_stage(self, keyword: str, name: str) -> list[Instruction]:
        return [i for i in self.all(keyword) if i.stage == self.stage_number(name)]

    def arg_defaults(self) -> dict[str, str | None]:
        """Every ARG and its default; a name declared twice must not change its default."""
        defaults: dict[str, str | None] = {}
        for arg in self.all("ARG"):
            name, has_default, default = arg.arguments.partition("=")
            value = default if has_default else None
            if name in defaults and value is not None and defaults[name] is not None:
                assert defaults[name] == value, f"{self.path.name}: ARG {name} has two defaults"
            if defaults.get(name) is None:
                defaults[name] = value
        return defaults

    def copies(self) -> list[Copy]:
        copies = []
        for instruction in self.all("COPY") + self.all("ADD"):
            words = shlex.split(instruction.arguments)
            flags = {}
            while words and words[0].startswith("--"):
                key, _, value = words.pop(0)[2:].partition("=")
                flags[key] = value
            if words and words[0].startswith("["):
                words = json.loads(" ".join(words))
            *sources, destination = words
            copies.append(Copy(tuple(sources), destination, flags, instruction.stage))
        return copies

    def text(self) -> str:
        return self.path.read_text()


def versions() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in VERSIONS.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep, f"versions.env: not KEY=VALUE: {line!r}"
        assert key not in pins, f"versions.env: {key} twice"
        pins[key] = value
    return pins


def build_args(image: str) -> dict[str, str]:
    """The --build-args images/build.sh passes for one image, read from its --dry-run."""
    out = subprocess.run(
        ["bash", str(BUILD), "--dry-run", image], capture_output=True, text=True, check=True
    ).stdout
    (command,) = [shlex.split(line) for line in out.splitlines() if line.strip()]
    args = {}
    for flag, value in itertools.pairwise(command):
        if flag == "--build-arg":
            key, _, pinned = value.partition("=")
            args[key] = pinned
    return args
