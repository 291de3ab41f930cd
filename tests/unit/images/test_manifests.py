"""The trainer images' manifests (images/manifest.py) say what the images install, and each image
names its own, so `grpo-train plan` outside and the pod at start-up plan from the same file."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys

import pytest
from grpo_trainer import trainer_image
from packaging.utils import canonicalize_name
from support.dockerfile import BUILD, DOCKERFILES, REPO, Dockerfile, build_args

spec = importlib.util.spec_from_file_location("image_manifest", REPO / "images" / "manifest.py")
assert spec
assert spec.loader
image_manifest = importlib.util.module_from_spec(spec)
sys.modules["image_manifest"] = image_manifest  # its dataclasses look their module up there
spec.loader.exec_module(image_manifest)

# The stages whose virtualenv each image ships (Dockerfile.cuda's final stages copy it from them).
STAGES = {"cpu": ("torch", "cpu-deps"), "cuda": ("torch", "cuda-deps")}
TARGETS = {"cpu": "cpu", "cuda": "cuda"}
# pip's own tooling, installed into the fresh virtualenv before anything else.
TOOLING = {"pip", "setuptools", "wheel", "packaging"}
# Flags of `pip install` that take a value.
VALUED = {"-c", "-r", "--extra-index-url", "--index-url", "--no-binary", "-d"}


def _unconditional(text: str) -> str:
    """`${VAR:+words}` -> `words`: what the shell runs when the pin is set."""
    while (start := text.find(":+")) != -1:
        open_at = text.rindex("${", 0, start)
        depth, end = 1, start + 2
        while depth:
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        text = text[:open_at] + text[start + 2 : end - 1] + text[end:]
    return text


def _named_installs(runs: list[str]) -> set[str]:
    """The packages `pip install` lines name (not a requirements file, a wheel or the project)."""
    named: set[str] = set()
    for run in runs:
        lexer = shlex.shlex(_unconditional(run), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
        commands: list[list[str]] = [[]]
        for word in words:
            if word in ("&&", ";", "|", "||"):
                commands.append([])
            else:
                commands[-1].append(word)
        for command in commands:
            if "pip" not in command or command[command.index("pip") + 1 : command.index("pip") + 2] != [
                "install"
            ]:
                continue
            skip = False
            for word in command[command.index("pip") + 2 :]:
                if skip:
                    skip = False
                elif word in VALUED:
                    skip = True
                elif not word.startswith(("-", ".", "/", "$")):
                    named.add(canonicalize_name(word.split("[")[0]))
    return named - TOOLING


def _installed_by_name(flavour: str) -> set[str]:
    if flavour in STAGES:
        dockerfile = Dockerfile.read(DOCKERFILES["cuda"])
        runs = [i.arguments for stage in STAGES[flavour] for i in dockerfile.in_stage("RUN", stage)]
    else:
        runs = [i.arguments for i in Dockerfile.read(DOCKERFILES[flavour]).all("RUN")]
    installed = _named_installs(runs)
    if flavour == "ascend-a2-seed":
        installed.discard("transferqueue")  # an empty pin leaves it out (verl 0.7 has none)
    return installed


def test_the_committed_manifests_are_what_the_pins_make() -> None:
    assert sorted(image_manifest.FLAVOURS) == sorted(trainer_image.FLAVOURS)
    for flavour in trainer_image.FLAVOURS:
        committed = (REPO / "trainer" / "grpo_trainer" / "trainer_image" / f"{flavour}.json").read_text()
        assert committed == image_manifest.render(flavour), f"python images/manifest.py write {flavour}"


@pytest.mark.parametrize("flavour", ["cpu", "cuda", "ascend", "ascend-a2-seed"])
def test_a_manifest_lists_what_its_dockerfile_installs_by_name(flavour: str) -> None:
    listed = set(trainer_image.manifest(flavour).packages) - {"grpo-operator"}
    asked = {p for p, images in image_manifest.DEPENDENCIES_ASKED.items() if flavour in images}
    assert listed - asked == _installed_by_name(flavour)


@pytest.mark.parametrize("flavour", ["cpu", "cuda", "ascend", "ascend-a2-seed"])
def test_each_image_names_its_own_manifest_and_build_sh_writes_it_first(flavour: str) -> None:
    dockerfile = Dockerfile.read(DOCKERFILES["cuda" if flavour in TARGETS else flavour])
    if flavour in TARGETS:
        envs = dockerfile.in_stage("ENV", TARGETS[flavour])
        assert f"{trainer_image.FLAVOUR_ENV}={flavour}" in [e.arguments for e in envs]
    else:
        (env,) = [e for e in dockerfile.all("ENV") if e.arguments.startswith(trainer_image.FLAVOUR_ENV)]
        assert env.arguments == f"{trainer_image.FLAVOUR_ENV}=${{IMAGE_FLAVOUR}}"
        assert env.stage == dockerfile.stages
        assert build_args(flavour)["IMAGE_FLAVOUR"] == flavour
    script = BUILD.read_text()
    assert re.search(rf"manifest {re.escape(flavour)} &&\s+build ", script), (
        "the manifest is written before the build"
    )
    out = subprocess.run(
        ["bash", str(BUILD), "--dry-run", flavour], capture_output=True, text=True, check=True
    )
    (tag,) = re.findall(r" -t (\S+) ", out.stdout)
    assert trainer_image.flavour_of(tag) == flavour
    assert tag.endswith(trainer_image.manifest(flavour).image)
