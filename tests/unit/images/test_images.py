"""Static checks of the images, which these machines cannot build.

Versions are pinned once in images/versions.env; images/build.sh passes them as build args, the
Dockerfiles repeat them as ARG defaults, and pyproject.toml's train-cuda extra pins the same
Python packages as the CUDA image. These tests hold all of them together, and check what each
image must be: the files it copies exist, the trainers run `grpo-train`, the operator runs as a
numeric non-root user with only the operator's dependencies.
"""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path, PurePosixPath

import pytest
import yaml
from grpo_operator.config import Settings
from grpo_trainer.engines.verl.versions import PROFILES, SUPPORTED
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from support.dockerfile import BUILD, DOCKERFILES, REPO, Dockerfile, build_args, versions

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
CHART_VALUES = yaml.safe_load((REPO / "charts" / "grpo-operator" / "values.yaml").read_text())
PREFIXES = {
    "OPERATOR_": "operator",
    "CUDA_": "cuda",
    "CPU_": "cpu",
    "ASCEND_": "ascend",
    "SEED_A2_": "ascend-a2-seed",
}
# Build settings, not versions: they may differ per build machine.
TUNING_ARGS = {"MAX_JOBS", "BUILD_CA_IMAGE"}
# Pinned in the CUDA image but not in the train-cuda extra: flash-attn compiles against the
# installed torch (--no-build-isolation), which an extra cannot express; llama-cpp-python is not
# installed at all, only its sdist's vendored llama.cpp built (grpo_trainer/engines/trl/gguf_tools.py).
IMAGE_ONLY = {"flash-attn", "llama-cpp-python"}
TRAINERS = ("cuda", "ascend", "ascend-a2-seed")
UNIQUE_DOCKERFILES = sorted(set(DOCKERFILES.values()))


def _package(arg: str) -> str:
    """The Python package a *_VERSION build arg pins: TORCH_NPU_VERSION -> torch-npu."""
    return canonicalize_name(arg.removesuffix("_VERSION").replace("_", "-"))


def _version_args(dockerfile: Dockerfile) -> set[str]:
    return {name for name in dockerfile.arg_defaults() if name.endswith("_VERSION")}


@pytest.mark.parametrize("path", UNIQUE_DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_copied_file_exists_and_is_in_the_build_context(path: Path) -> None:
    dockerfile = Dockerfile.read(path)
    ignore = Path(f"{path}.dockerignore")
    assert ignore.is_file(), f"{ignore.name} keeps .venv and .cache out of the build context"
    allowed = [line[1:] for line in ignore.read_text().splitlines() if line.startswith("!")]
    copies = [c for c in dockerfile.copies() if "from" not in c.flags]
    assert copies
    for copy in copies:
        for source in copy.sources:
            assert (REPO / source).exists(), f"{path.name} copies {source}, which does not exist"
            assert any(source == a or source.startswith(f"{a}/") for a in allowed), (
                f"{path.name} copies {source}, which {ignore.name} leaves out of the context"
            )


def test_the_legacy_builders_context_is_the_union_of_the_dockerfiles_own() -> None:
    """Docker's legacy builder reads only the root .dockerignore: it must allow what every
    Dockerfile's own ignore file allows, and nothing more (not .venv, .cache or .git)."""

    def rules(path: Path) -> set[str]:
        return {line for line in path.read_text().splitlines() if line and not line.startswith("#")}

    union = set().union(*(rules(Path(f"{path}.dockerignore")) for path in UNIQUE_DOCKERFILES))
    assert rules(REPO / ".dockerignore") == union


@pytest.mark.parametrize("image", ["operator", "cuda", "ascend"])
def test_arg_defaults_are_the_pinned_versions(image: str) -> None:
    """A plain `docker build` and `make images` build the same image."""
    dockerfile = Dockerfile.read(DOCKERFILES[image])
    defaults = {k: v for k, v in dockerfile.arg_defaults().items() if k not in TUNING_ARGS}
    assert build_args(image) == defaults


def test_the_seed_stack_overrides_only_what_the_ascend_image_declares() -> None:
    declared = Dockerfile.read(DOCKERFILES["ascend-a2-seed"]).arg_defaults()
    seed = build_args("ascend-a2-seed")
    assert set(seed) <= set(declared)
    changed = {k for k in seed if seed[k] != build_args("ascend")[k]}
    assert {
        "CANN_BASE_IMAGE",
        "TORCH_VERSION",
        "TORCH_NPU_VERSION",
        "VLLM_VERSION",
        "VERL_VERSION",
    } <= changed
    assert seed["CANN_BASE_IMAGE"].split(":")[1].startswith("8.3.rc1")
    assert seed["TORCH_NPU_VERSION"] == "2.7.1"


def test_every_pin_belongs_to_an_image() -> None:
    for key, value in versions().items():
        prefix = next((p for p in PREFIXES if key.startswith(p)), None)
        assert prefix, f"versions.env: {key} has no image prefix ({', '.join(PREFIXES)})"
        assert not re.search(r"\s", value), f"versions.env: {key} has whitespace"


@pytest.mark.parametrize("path", UNIQUE_DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_arg_is_used_and_every_version_reaches_pip(path: Path) -> None:
    dockerfile = Dockerfile.read(path)
    body = "\n".join(f"{i.keyword} {i.arguments}" for i in dockerfile.instructions if i.keyword != "ARG")
    for name in dockerfile.arg_defaults():
        assert re.search(rf"\$\{{{name}\b|\${name}\b", body), f"{path.name}: ARG {name} is never used"
    # Every *_VERSION lands in the constraints file as "<package>==${ARG}".
    constrained = {canonicalize_name(p): a for p, a in re.findall(r'"([A-Za-z0-9_.\-]+)==\$\{(\w+)\}"', body)}
    for arg in _version_args(dockerfile):
        assert constrained.get(_package(arg)) == arg, f"{path.name}: {arg} does not pin {_package(arg)}"


@pytest.mark.parametrize("path", UNIQUE_DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_base_images_are_pinned_tags(path: Path) -> None:
    dockerfile = Dockerfile.read(path)
    defaults = dockerfile.arg_defaults()
    stages = list(dockerfile.stage_bases())
    for index, image in enumerate(dockerfile.stage_bases().values()):
        if image in stages[:index]:
            continue  # an earlier stage
        match = re.fullmatch(r"\$\{(\w+)\}", image)
        assert match, f"{path.name}: FROM {image} should come from a pinned ARG or an earlier stage"
        pinned = defaults[match.group(1)]
        assert pinned
        # The build CA's image defaults to the base image itself (its own CA bundle).
        pinned = defaults.get(pinned.strip("${}"), pinned) if pinned.startswith("${") else pinned
        assert pinned
        assert ":" in pinned.rsplit("/", 1)[-1], f"{path.name}: {pinned} has no tag"
        assert not pinned.endswith(":latest")


@pytest.mark.parametrize("path", [DOCKERFILES["operator"], DOCKERFILES["cuda"]], ids=lambda p: p.name)
def test_the_build_ca_stays_in_the_build_stages(path: Path) -> None:
    """pip in the build stages trusts the build machine's CA bundle (images/build.sh passes it as
    an image); the images that ship are built on stages that never saw it."""
    dockerfile = Dockerfile.read(path)
    bases = dockerfile.stage_bases()
    with_ca = {c.stage for c in dockerfile.copies() if c.flags.get("from") == "build-ca"}
    assert with_ca, "pip's CA bundle comes from the build-ca stage"
    finals = [name for name in bases if name in {"cpu", "cuda"}] or [list(bases)[-1]]
    for final in finals:
        lineage = dockerfile.lineage(final)
        assert not {dockerfile.stage_number(s) for s in lineage} & with_ca, f"{final} is built on the CA"
        assert not [
            e
            for e in dockerfile.all("ENV")
            if "PIP_CERT" in e.arguments and e.stage in {dockerfile.stage_number(s) for s in lineage}
        ]


def test_the_cpu_image_is_the_cuda_dockerfiles_own_stages() -> None:
    """One Dockerfile for both trainer images: the CPU image is a target of Dockerfile.cuda on the
    same system and torch stages, with the same user and entrypoint, and no CUDA toolchain."""
    dockerfile = Dockerfile.read(DOCKERFILES["cuda"])
    assert dockerfile.lineage("cpu") == ["cpu", "system"]
    assert dockerfile.lineage("cpu-build") == ["cpu-build", "cpu-deps", "torch", "system"]
    assert dockerfile.lineage("cuda-build") == ["cuda-build", "cuda-deps", "torch", "system"]
    # The legacy builder builds every stage before its target: the CPU stages come first.
    assert dockerfile.stage_number("cpu") < dockerfile.stage_number("cuda-deps")
    for stage in ("cpu", "cuda"):
        (user,) = dockerfile.in_stage("USER", stage)
        assert user.arguments == "1000:1000"
        (entrypoint,) = dockerfile.in_stage("ENTRYPOINT", stage)
        assert entrypoint.exec_form() == ["grpo-train"]
    cpu = build_args("cpu")
    assert "nvidia" not in cpu["BASE_IMAGE"]
    assert cpu["PYTHON"] != build_args("cuda")["PYTHON"]
    assert not {"build-essential", "cmake"} & set(cpu["SYSTEM_PACKAGES"].split(","))
    # The same lock and the same pins as the CUDA image, apart from what the CPU_ values change.
    cuda = build_args("cuda")
    assert {k: v for k, v in cpu.items() if k.endswith("_VERSION")} == {
        k: v for k, v in cuda.items() if k.endswith("_VERSION")
    }


@pytest.mark.parametrize(
    ("final", "layers"),
    [
        ("cpu", {"cpu-slim": ["/opt/venv"], "cpu-build": ["/opt/grpo/dist"]}),
        (
            "cuda",
            {"cuda-deps": ["/opt/venv"], "llama-cpp": ["/opt/llama.cpp"], "cuda-build": ["/opt/grpo/dist"]},
        ),
    ],
)
def test_a_code_change_rebuilds_only_the_packages_small_layer(
    final: str, layers: dict[str, list[str]]
) -> None:
    """The trainer images ship their dependencies and the project's package as separate layers:
    the stages that install the dependencies (gigabytes) copy no code, so a change to `operator/`
    or `trainer/` rebuilds only the package's wheel and the layer that installs it (a node imports
    megabytes, not the whole environment again)."""
    dockerfile = Dockerfile.read(DOCKERFILES["cuda"])
    code = ("operator", "trainer")
    for stage in layers:
        if stage.endswith("-build"):
            continue
        for number in {dockerfile.stage_number(s) for s in dockerfile.lineage(stage)}:
            sources = [
                src
                for c in dockerfile.copies()
                if c.stage == number and "from" not in c.flags
                for src in c.sources
            ]
            whole_code = [src for src in sources if src.rstrip("/") in code]
            assert not whole_code, f"stage {stage} copies {whole_code}: every code change would rebuild it"
    copied = {}
    for c in dockerfile.copies():
        if c.stage == dockerfile.stage_number(final):
            copied.setdefault(c.flags["from"], []).extend(c.sources)
    assert copied == layers
    # The package goes in last, offline and without dependencies (they are the layer below).
    (install,) = [r for r in dockerfile.in_stage("RUN", final) if "pip install" in r.arguments]
    assert "--no-deps --no-index /opt/grpo/dist/" in install.arguments


def test_the_images_read_the_packages_requirements_from_pyproject() -> None:
    """images/trainer/package_requirements.py gives the dependency layer exactly what installing
    `.[trainer]` would ask for, the project's own extras expanded."""
    script = REPO / "images" / "trainer" / "package_requirements.py"
    printed = subprocess.run(
        ["python3", str(script), str(REPO / "pyproject.toml"), "trainer"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    project = PYPROJECT["project"]
    assert printed == [*project["dependencies"], *project["optional-dependencies"]["trainer"]]
    plugin = subprocess.run(
        ["python3", str(script), str(REPO / "pyproject.toml"), "plugin"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    assert "grpo-operator[trainer]" not in plugin
    assert set(project["optional-dependencies"]["trainer"]) <= set(plugin)
    refused = subprocess.run(
        ["python3", str(script), str(REPO / "pyproject.toml"), "nonesuch"], capture_output=True, text=True
    )
    assert refused.returncode != 0
    assert "no extra 'nonesuch'" in refused.stderr


def test_train_cuda_extra_pins_what_the_cuda_image_installs() -> None:
    image = build_args("cuda")
    expected = {
        _package(arg): value
        for arg, value in image.items()
        if arg.endswith("_VERSION") and _package(arg) not in IMAGE_ONLY
    }
    pinned = {}
    for line in PYPROJECT["project"]["optional-dependencies"]["train-cuda"]:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        if name == "grpo-operator":
            continue
        specs = list(requirement.specifier)
        assert len(specs) == 1, f"train-cuda: {line} is not an exact pin"
        assert specs[0].operator == "==", f"train-cuda: {line} is not an exact pin"
        pinned[name] = specs[0].version
    assert pinned == expected


def test_ray_is_the_version_the_operator_writes_into_rayjobs() -> None:
    ray = Settings().ray_version
    assert CHART_VALUES["settings"]["rayVersion"] == ray
    for image in TRAINERS:
        assert build_args(image)["RAY_VERSION"] == ray, image


def test_every_verl_has_a_tested_trainer_profile() -> None:
    """The trainer emits version-specific verl keys; an image may only carry a verl it knows."""
    families = {}
    for image in TRAINERS:
        verl = build_args(image)["VERL_VERSION"]
        assert verl in SUPPORTED, (
            f"{image}: verl {verl} has no profile in grpo_trainer/engines/verl/versions.py"
        )
        families[image] = next(p.family for p in PROFILES.values() if p.reference_version == verl)
    assert families == {"cuda": "0.9", "ascend": "0.9", "ascend-a2-seed": "0.7"}


def _installed_extras(dockerfile: Dockerfile) -> set[str]:
    """The project's extras an image installs: `".[x,y]"`, or named to package_requirements.py
    (the dependency layer of the trainer images)."""
    runs = " ".join(i.arguments for i in dockerfile.all("RUN"))
    named = {e for extras in re.findall(r'"\.\[([\w,-]+)\]"', runs) for e in extras.split(",")}
    listed = re.findall(r"package_requirements\.py \S+((?: [\w-]+)*) >", runs)
    return named | {e for extras in listed for e in extras.split()}


@pytest.mark.parametrize("image", TRAINERS)
def test_trainer_images_run_grpo_train(image: str) -> None:
    dockerfile = Dockerfile.read(DOCKERFILES[image])
    assert PYPROJECT["project"]["scripts"]["grpo-train"] == "grpo_trainer.cli:main"
    assert _installed_extras(dockerfile) == {"trainer"}
    (entrypoint,) = dockerfile.final("ENTRYPOINT")
    command = entrypoint.exec_form()
    assert command[-1] == "grpo-train"
    # Anything before it is a wrapper the image ships, and the wrapper execs its arguments.
    for wrapper in command[:-1]:
        (copy,) = [c for c in dockerfile.copies() if PurePosixPath(c.destination) == PurePosixPath(wrapper)]
        assert copy.flags.get("chmod") == "0755"
        script = (REPO / copy.sources[0]).read_text()
        assert script.rstrip().splitlines()[-1] == 'exec "$@"'
        result = subprocess.run(["bash", "-n", str(REPO / copy.sources[0])], capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


def test_operator_image_is_small_and_unprivileged() -> None:
    dockerfile = Dockerfile.read(DOCKERFILES["operator"])
    assert dockerfile.stages >= 2, "build in one stage, run from a clean one"
    assert _installed_extras(dockerfile) == {"operator"}
    final_copies = [c for c in dockerfile.copies() if c.stage == dockerfile.stages]
    assert final_copies
    assert all("from" in c.flags for c in final_copies), "the final stage takes only the built venv"
    assert not dockerfile.final("RUN"), "nothing is installed in the final stage"
    (user,) = dockerfile.final("USER")
    uid, _, gid = user.arguments.partition(":")
    assert uid.isdigit(), "a numeric USER lets the kubelet verify runAsNonRoot"
    assert gid.isdigit()
    assert int(uid) != 0
    assert int(uid) == CHART_VALUES["podSecurityContext"]["runAsUser"]
    assert int(gid) == CHART_VALUES["podSecurityContext"]["runAsGroup"]
    (entrypoint,) = dockerfile.final("ENTRYPOINT")
    assert entrypoint.exec_form() == ["grpo-operator"]
    assert PYPROJECT["project"]["scripts"]["grpo-operator"] == "grpo_operator.cli:main"


def test_operator_extra_carries_no_trainer_dependencies() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    operator = {canonicalize_name(Requirement(r).name) for r in extras["operator"]}
    trainer = {canonicalize_name(Requirement(r).name) for r in extras["trainer"] + extras["train-cuda"]}
    assert not operator & trainer


@pytest.mark.parametrize(
    ("image", "profile"), [("cuda", "nvidia"), ("ascend", "ascend"), ("ascend-a2-seed", "ascend")]
)
def test_trainer_images_run_as_the_profiles_unprivileged_user(image: str, profile: str) -> None:
    """The Ray pods run as the profile's runAsUser:runAsGroup (non-root, the `restricted` level):
    the image's last USER must be that same numeric pair, and its home must be theirs."""
    dockerfile = Dockerfile.read(DOCKERFILES[image])
    users = dockerfile.all("USER")
    assert users, "no USER: the image would run as root"
    uid, _, gid = users[-1].arguments.partition(":")
    assert uid.isdigit(), "a numeric USER lets the kubelet verify runAsNonRoot"
    assert gid.isdigit()
    settings = Settings().profiles[profile]
    assert (int(uid), int(gid)) == (settings.run_as_user, settings.run_as_group)
    assert int(uid) != 0
    values = CHART_VALUES["profiles"][profile]
    assert (values["runAsUser"], values["runAsGroup"]) == (int(uid), int(gid))
    runs = " ".join(i.arguments for i in dockerfile.all("RUN"))
    assert re.search(rf"(useradd|install -d) [^;]*(--uid|-o) {uid}", runs), "the user (and its home) is made"


def test_build_script_tags_the_images_the_chart_and_operator_use() -> None:
    result = subprocess.run(["bash", "-n", str(BUILD)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    out = subprocess.run(["bash", str(BUILD), "--dry-run"], capture_output=True, text=True, check=True).stdout
    tags = re.findall(r" -t (\S+) ", out)
    version = PYPROJECT["project"]["version"]
    registry = "ghcr.io/grpo-operator"
    assert tags == [
        f"{registry}/operator:{version}",
        f"{registry}/trainer-cpu:{version}",
        f"{registry}/trainer-cuda:{version}",
        f"{registry}/trainer-ascend:{version}",
        f"{registry}/trainer-ascend:{version}-a2-seed",
    ]
    profiles = Settings().profiles
    assert profiles["nvidia"].image == tags[2]
    assert profiles["ascend"].image == tags[3]
    assert f"{CHART_VALUES['image']['repository']}:{version}" == tags[0]


def test_build_script_refuses_unknown_images() -> None:
    result = subprocess.run(["bash", str(BUILD), "--dry-run", "rocm"], capture_output=True, text=True)
    assert result.returncode != 0
    assert "unknown image 'rocm'" in result.stderr
