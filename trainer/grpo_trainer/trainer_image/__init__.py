"""The trainer image a job runs in, and what it holds: plans are made for it, never for this machine.

Whether bitsandbytes is there (the single-GPU LoRA recipe's adamw_8bit), or vLLM, verl,
TensorBoard, W&B or llama.cpp's tools, changes a job's plan. The machine that runs `grpo-train
plan` or `kubectl grpo plan` is not the pod, so the answer comes from the image instead: this
package carries one manifest per trainer image images/build.sh builds (`<flavour>.json`, made by
images/manifest.py from the pins the image is built from), and

- outside a pod, `for_job` picks the image the operator will run the job in (`spec.image`, else
  its accelerator profile's default image) and the manifest of that image;
- in a pod, `running` takes the manifest the image names as its own (`GRPO_IMAGE_FLAVOUR`, set
  by its Dockerfile), and `differences` compares it with what is installed, so a stale manifest
  is said loudly at start-up rather than found as a plan the pod did not run.

Both plan with the same function from the same file, so the plan printed outside and the one the
pod prints at start-up agree by construction.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from grpo_operator.api.v1alpha1 import ResolvedJob
from grpo_operator.config import Settings

FLAVOUR_ENV = "GRPO_IMAGE_FLAVOUR"
"""Set by each trainer image's Dockerfile: the name of its own manifest."""
FLAVOURS = ("cuda", "cpu", "ascend", "ascend-a2-seed")
FLAVOUR_OF_DEVICE = {"cuda": "cuda", "npu": "ascend", "cpu": "cpu"}
"""The image built for a device, for a job whose image is none of the project's."""
ASKED_ABOUT = frozenset(
    {"vllm", "bitsandbytes", "flash-attn", "verl", "trl", "peft", "accelerate", "tensorboard", "wandb"}
)
"""Packages whose presence changes a plan. A manifest lists each one its image has; one it does not
list, the image does not have, and `differences` says so when it is installed after all."""


def canonical(name: str) -> str:
    """A package's name as manifests spell it (PEP 503): TransferQueue -> transferqueue."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Manifest:
    """What one trainer image holds (images/manifest.py writes it from the image's pins)."""

    flavour: str
    image: str
    """The image's name and tag as images/build.sh tags it, without the registry."""
    packages: Mapping[str, str]
    """Canonical package name -> the version the image installs."""
    tools: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Programs outside Python (llama.cpp's GGUF tools): their version and folder in the image."""

    def has(self, package: str) -> bool:
        return canonical(package) in self.packages

    def version(self, package: str) -> str | None:
        return self.packages.get(canonical(package))

    @property
    def repository(self) -> str:
        return self.image.partition(":")[0]

    @property
    def tag_suffix(self) -> str:
        """What follows the project's version in the tag (`-a2-seed`; empty for most images)."""
        return self.image.partition(":")[2].removeprefix(self.packages.get("grpo-operator", ""))


@functools.cache
def manifest(flavour: str) -> Manifest:
    """The manifest of a trainer image this package knows (one of FLAVOURS)."""
    if flavour not in FLAVOURS:
        raise ValueError(f"no trainer image {flavour!r} (known: {', '.join(FLAVOURS)})")
    data = json.loads(resources.files(__name__).joinpath(f"{flavour}.json").read_text(encoding="utf-8"))
    return Manifest(data["flavour"], data["image"], dict(data["packages"]), dict(data.get("tools") or {}))


@dataclass(frozen=True)
class TrainerImage:
    """The image a plan is made for, and why that one."""

    manifest: Manifest
    reference: str | None
    """The image reference the pods run, when known (outside a pod: spec.image or the profile's)."""
    why: str
    warnings: tuple[str, ...] = ()

    def has(self, package: str) -> bool:
        return self.manifest.has(package)

    def version(self, package: str) -> str | None:
        return self.manifest.version(package)

    @property
    def name(self) -> str:
        """How a plan's reasons name it: "the trainer-cuda:0.1.0 image"."""
        return f"the {self.manifest.image} image"

    def describe(self) -> str:
        """One line for the plan: the reference, why it is the one, and the manifest used."""
        reference = self.reference or "this pod's image"
        return f"{reference} ({self.why}); planned from the manifest of {self.manifest.image}"

    def as_json(self) -> dict[str, object]:
        return {
            "reference": self.reference,
            "why": self.why,
            "manifest": self.manifest.image,
            "flavour": self.manifest.flavour,
        }


def _split(reference: str) -> tuple[str, str | None]:
    """(repository's last part, tag): registry.local:5000/org/trainer-cuda:0.1.0 -> (trainer-cuda, 0.1.0)."""
    last = reference.rstrip("/").rsplit("/", 1)[-1]
    name, _, _digest = last.partition("@")
    repository, _, tag = name.partition(":")
    return repository, tag or None


def flavour_of(reference: str) -> str | None:
    """The project's trainer image a reference names, by its repository and tag suffix; None for another."""
    repository, tag = _split(reference)
    candidates = [manifest(f) for f in FLAVOURS if manifest(f).repository == repository]
    # The longest suffix that the tag carries: trainer-ascend:0.1.0-a2-seed is the seed stack.
    for candidate in sorted(candidates, key=lambda m: len(m.tag_suffix), reverse=True):
        if candidate.tag_suffix and tag and tag.endswith(candidate.tag_suffix):
            return candidate.flavour
        if not candidate.tag_suffix:
            return candidate.flavour
    return None


def _tag_warning(reference: str, found: Manifest) -> tuple[str, ...]:
    _, tag = _split(reference)
    if tag == found.image.partition(":")[2]:
        return ()
    return (
        f"{reference}: the manifests are those of this trainer's images ({found.image}); an image of "
        "another tag or a digest may hold other packages, which its start-up log names",
    )


def for_job(job: ResolvedJob, settings: Settings | None = None) -> TrainerImage:
    """The image the operator will run `job` in, as a plan made outside a pod sees it.

    `spec.image` when set, else the job's accelerator profile's default image in the operator's
    default settings (an installation that changed it in Helm values is not known here: set
    spec.image to plan for that one).
    """
    settings = settings or Settings()
    profile = settings.profile(job.accelerator.name)
    if job.spec.image:
        reference, source = job.spec.image, "spec.image"
    elif profile is not None:
        reference = profile.image
        source = f"the {job.accelerator.name} profile's default image in the operator's default settings"
    else:
        return _fallback(
            job, settings, None, f"no {job.accelerator.name} profile in the operator's default settings"
        )
    flavour = flavour_of(reference)
    if flavour is not None:
        return TrainerImage(manifest(flavour), reference, source, _tag_warning(reference, manifest(flavour)))
    return _fallback(job, settings, reference, f"{source}, not one of the project's trainer images")


def _fallback(job: ResolvedJob, settings: Settings, reference: str | None, source: str) -> TrainerImage:
    """An image of unknown contents: planned for the image the project builds for the job's pool."""
    profile = settings.profile(job.accelerator.name)
    flavour = (flavour_of(profile.image) if profile else None) or FLAVOUR_OF_DEVICE[job.accelerator.device]
    chosen = manifest(flavour)
    warning = (
        f"{reference or 'the job image'} is not one of the project's trainer images: planned as if it held "
        f"what {chosen.image} holds; its start-up log compares its packages with that manifest"
    )
    return TrainerImage(chosen, reference, f"{source}; planned as {chosen.image}", (warning,))


def running(job: ResolvedJob, environ: Mapping[str, str] | None = None) -> TrainerImage:
    """The image this process runs in: the manifest it names as its own (`GRPO_IMAGE_FLAVOUR`).

    A process outside the project's images (a development machine, an image built another way)
    plans as `for_job` does, and `differences` then says how this environment differs from it.
    """
    env = os.environ if environ is None else environ
    flavour = env.get(FLAVOUR_ENV)
    if flavour in FLAVOURS:
        return TrainerImage(manifest(flavour), None, f"{FLAVOUR_ENV}={flavour}")
    planned = for_job(job)
    return TrainerImage(
        planned.manifest,
        planned.reference,
        f"{FLAVOUR_ENV} is unset, so not one of the project's images: planned as outside a pod, "
        f"{planned.why}",
        planned.warnings,
    )


def installed_packages() -> dict[str, str]:
    """Every installed distribution: canonical name -> version."""
    found: dict[str, str] = {}
    for distribution in importlib.metadata.distributions():
        name = distribution.metadata["Name"]
        if name:
            found.setdefault(canonical(name), distribution.version)
    return found


def differences(
    image: Manifest, installed: Mapping[str, str], tool_exists: Mapping[str, bool] | None = None
) -> list[str]:
    """How what is installed differs from the image's manifest, one line each (empty: it does not).

    A version compares without its local part (torch's `2.11.0+cu130` is the pinned 2.11.0).
    """
    found: list[str] = []
    for package, version in sorted(image.packages.items()):
        actual = installed.get(package)
        if actual is None:
            found.append(f"{package}: the manifest lists {version}, and it is not installed")
        elif actual.split("+", 1)[0] != version:
            found.append(f"{package}: the manifest lists {version}, and {actual} is installed")
    for package in sorted(ASKED_ABOUT - image.packages.keys()):
        if package in installed:
            found.append(
                f"{package}: {installed[package]} is installed, and the manifest does not list it "
                "(plans for this image take it as absent)"
            )
    exists = (
        tool_exists
        if tool_exists is not None
        else {tool: Path(spec["path"]).is_dir() for tool, spec in image.tools.items()}
    )
    for tool, spec in sorted(image.tools.items()):
        if not exists.get(tool, False):
            found.append(
                f"{tool}: the manifest puts {spec.get('version')} in {spec['path']}, which is not there"
            )
    return found
