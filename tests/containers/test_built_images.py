"""The images `make images` builds, run as containers: what a kubelet would start, with the
hardening the chart and the operator's Ray pods ask for (a numeric non-root user, a read-only
root filesystem, every capability dropped, no privilege escalation)."""

from __future__ import annotations

import json

from .conftest import REPO, docker, pinned

# What the chart's operator pod and the Ray pods' `restricted` Pod Security level amount to.
HARDENED = ["--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--network", "none"]


def test_the_operator_image_runs_as_the_charts_user_on_a_read_only_root(images) -> None:
    config = images["operator"]["Config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["grpo-operator"]
    assert config["Cmd"] == ["run"]
    tag = images["operator"]["RepoTags"][0]
    run = docker("run", "--rm", *HARDENED, "--user", "65532:65532", tag, "--version")
    assert run.stdout.strip().endswith(tag.rsplit(":", 1)[1])


def test_the_operator_in_its_image_generates_the_committed_crd(images) -> None:
    """The image carries the same API models as this checkout: its `grpo-operator crd` is crds/."""
    tag = images["operator"]["RepoTags"][0]
    run = docker("run", "--rm", *HARDENED, tag, "crd")
    assert run.stdout == (REPO / "crds" / "grpo.dev_grpojobs.yaml").read_text()


def test_the_cpu_trainer_image_runs_grpo_train_as_the_ray_user(images) -> None:
    config = images["cpu"]["Config"]
    assert config["User"] == "1000:1000"
    assert config["Entrypoint"] == ["grpo-train"]
    tag = images["cpu"]["RepoTags"][0]
    docker("run", "--rm", *HARDENED, "--tmpfs", "/tmp", "--user", "1000:1000", tag, "--help")
    # KubeRay starts Ray pods with `bash -lc "ulimit -n 65536; ray start ..."`: bash, Ray at the
    # pinned version, and the training stack importable by the unprivileged user.
    probe = (
        "import json, ray, torch, transformers, trl, peft, datasets, grpo_trainer; "
        "print(json.dumps({m.__name__: m.__version__ for m in (ray, torch, transformers, trl, peft, datasets)}))"
    )
    run = docker(
        "run",
        "--rm",
        *HARDENED,
        "--tmpfs",
        "/tmp",
        "--entrypoint",
        "bash",
        tag,
        "-lc",
        f"python -c '{probe}'",
    )
    versions = json.loads(run.stdout.strip().splitlines()[-1])
    assert versions["ray"] == pinned("CUDA_RAY_VERSION")
    assert versions["torch"].split("+")[0] == pinned("CUDA_TORCH_VERSION")
    assert versions["transformers"] == pinned("CUDA_TRANSFORMERS_VERSION")
    assert versions["trl"] == pinned("CUDA_TRL_VERSION")
    assert versions["peft"] == pinned("CUDA_PEFT_VERSION")
    home = docker("run", "--rm", "--entrypoint", "bash", tag, "-c", "stat -c %u:%g $HOME && whoami")
    assert home.stdout.split() == ["1000:1000", "ray"]


def test_the_build_machines_ca_never_reaches_a_final_image(images) -> None:
    """pip trusted the build machine's CA bundle in the build stages only."""
    for name, inspect in images.items():
        assert not [e for e in inspect["Config"]["Env"] or [] if e.startswith("PIP_CERT=")], name
        tag = inspect["RepoTags"][0]
        history = docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", tag).stdout
        assert "build-ca" not in history, name
        check = docker(
            "run", "--rm", "--entrypoint", "sh", tag, "-c", "test ! -e /etc/build-ca.pem && echo absent"
        )
        assert check.stdout.strip() == "absent", name


def test_the_cpu_trainer_image_carries_no_cuda(images) -> None:
    """PyPI's torch brings CUDA's libraries and triton (3.3 GB); the CPU image has stand-ins in their
    place (images/trainer/cuda_stubs.py), torch sees no device, and the image stays under 3 GB
    (6.1 GB with them)."""
    tag = images["cpu"]["RepoTags"][0]
    probe = (
        "import importlib.metadata as m, torch; "
        "left = sorted(d.metadata['Name'] for d in m.distributions() "
        "if d.metadata['Name'].startswith('nvidia-') or d.metadata['Name'] == 'triton'); "
        "x = torch.randn(8, 8, requires_grad=True); (x @ x).sum().backward(); "
        "print(left, torch.cuda.is_available(), torch.cuda.device_count())"
    )
    run = docker("run", "--rm", *HARDENED, "--tmpfs", "/tmp", "--entrypoint", "python", tag, "-c", probe)
    assert run.stdout.strip().splitlines()[-1] == "[] False 0"
    stubs = docker(
        "run", "--rm", "--entrypoint", "bash", tag, "-c", "ls /opt/venv/lib/python3*/site-packages/torch/lib"
    )
    assert "libcudart.so.13" in stubs.stdout.split()
    assert images["cpu"]["Size"] < 3 * 10**9, images["cpu"]["Size"]
