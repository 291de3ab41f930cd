"""Which trainer image a plan is for, what its manifest says, and how a pod finds its image differs.

A plan is made for the image the job will run in, never for the machine that plans: outside a
pod that is spec.image or the accelerator profile's default image, inside it the manifest the
image names as its own (GRPO_IMAGE_FLAVOUR). At start-up the pod compares that manifest with
what is installed and says every difference.
"""

from __future__ import annotations

import pytest
from grpo_operator.api.v1alpha1 import ResolvedJob
from grpo_trainer import trainer_image
from grpo_trainer.trainer_image import FLAVOUR_ENV, differences, flavour_of, for_job, manifest, running
from support.trainer_inputs import example_job


def _job(**spec: object) -> ResolvedJob:
    return example_job("lora-single-gpu", **spec)


@pytest.mark.parametrize(
    ("reference", "flavour"),
    [
        ("ghcr.io/grpo-operator/trainer-cuda:0.1.0", "cuda"),
        ("registry.local:5000/mirror/trainer-cpu:0.1.0", "cpu"),
        ("ghcr.io/grpo-operator/trainer-ascend:0.1.0", "ascend"),
        ("ghcr.io/grpo-operator/trainer-ascend:0.1.0-a2-seed", "ascend-a2-seed"),
        ("ghcr.io/grpo-operator/trainer-cuda@sha256:" + "0" * 64, "cuda"),
        ("docker.io/library/python:3.12", None),
    ],
)
def test_an_image_reference_names_its_manifest_by_repository_and_tag_suffix(
    reference: str, flavour: str | None
) -> None:
    assert flavour_of(reference) == flavour


def test_a_job_without_spec_image_is_planned_for_its_profiles_default_image() -> None:
    image = for_job(_job())
    assert image.reference == "ghcr.io/grpo-operator/trainer-cuda:0.1.0"
    assert image.manifest.flavour == "cuda"
    assert "the nvidia profile's default image" in image.why
    assert image.has("bitsandbytes")
    assert image.version("vllm") == "0.24.0"
    assert not image.warnings


def test_spec_image_wins_and_an_image_of_another_tag_is_planned_with_a_warning() -> None:
    image = for_job(_job(image="ghcr.io/grpo-operator/trainer-cpu:0.0.9"))
    assert (image.reference, image.why, image.manifest.flavour) == (
        "ghcr.io/grpo-operator/trainer-cpu:0.0.9",
        "spec.image",
        "cpu",
    )
    (warning,) = image.warnings
    assert "trainer-cpu:0.1.0" in warning
    assert "start-up log" in warning


def test_an_image_the_project_does_not_build_is_planned_as_its_pools_image_and_says_so() -> None:
    image = for_job(_job(image="registry.local/team/my-trainer:7"))
    assert image.manifest.flavour == "cuda"  # the nvidia profile's image
    assert "not one of the project's trainer images" in image.why
    (warning,) = image.warnings
    assert "registry.local/team/my-trainer:7" in warning
    assert "trainer-cuda:0.1.0" in warning


def test_in_a_pod_the_image_names_its_own_manifest() -> None:
    job = _job()  # an nvidia job: outside, it is planned for the CUDA image
    inside = running(job, {FLAVOUR_ENV: "cpu"})
    assert (inside.manifest.flavour, inside.reference) == ("cpu", None)
    assert inside.why == f"{FLAVOUR_ENV}=cpu"
    # Outside any of the project's images (a development machine): planned as outside a pod.
    elsewhere = running(job, {})
    assert elsewhere.manifest.flavour == "cuda"
    assert f"{FLAVOUR_ENV} is unset" in elsewhere.why


def test_the_manifests_of_the_images_say_what_each_holds() -> None:
    assert manifest("cpu").has("trl")
    assert not manifest("cpu").has("vllm")
    assert not manifest("cpu").has("bitsandbytes")
    assert manifest("ascend-a2-seed").version("verl") == "0.7.1"
    assert manifest("ascend").version("verl") == "0.9.1"
    assert manifest("cuda").tools["llama.cpp"]["path"] == "/opt/llama.cpp"
    with pytest.raises(ValueError, match="no trainer image 'rocm'"):
        manifest("rocm")


def test_a_stale_manifest_shows_as_every_difference_from_what_is_installed() -> None:
    cpu = manifest("cpu")
    installed = dict(cpu.packages)
    assert differences(cpu, installed) == []
    installed["torch"] += "+cpu"  # a local version part is the same release
    assert differences(cpu, installed) == []
    installed["trl"] = "1.15.0"
    del installed["peft"]
    installed["bitsandbytes"] = "0.50.2"  # the manifest says the image has none
    installed["numpy"] = "2.0.0"  # a package no plan asks about is no difference
    found = differences(cpu, installed)
    assert found == [
        "peft: the manifest lists 0.21.2, and it is not installed",
        "trl: the manifest lists 1.16.0, and 1.15.0 is installed",
        "bitsandbytes: 0.50.2 is installed, and the manifest does not list it (plans for this image take it as absent)",
    ]
    cuda = manifest("cuda")
    assert differences(cuda, dict(cuda.packages), {"llama.cpp": False}) == [
        "llama.cpp: the manifest puts 0.3.36 in /opt/llama.cpp, which is not there"
    ]


def test_the_development_environment_is_compared_as_any_other() -> None:
    """This machine has TRL but no vLLM: compared with the CUDA image's manifest it differs, and says how."""
    found = differences(manifest("cuda"), trainer_image.installed_packages(), {"llama.cpp": True})
    assert "vllm: the manifest lists 0.24.0, and it is not installed" in found
