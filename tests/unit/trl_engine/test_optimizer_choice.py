"""The single-GPU LoRA recipe's adamw_8bit where the job's trainer image has bitsandbytes (the CUDA
image), adamw_torch elsewhere, with the reason: read from the image's manifest, never from the
machine that plans."""

from __future__ import annotations

from grpo_trainer.engines.trl.job import optimizer, reasons, settings_from_job
from grpo_trainer.trainer_image import for_job, manifest, running
from support.trainer_inputs import example_job


def test_the_cuda_image_has_bitsandbytes_so_the_recipes_adamw_8bit() -> None:
    job = example_job("lora-single-gpu")
    image = for_job(job)
    assert image.manifest.flavour == "cuda"
    assert optimizer(job, image) == (
        "adamw_8bit",
        "the single-GPU LoRA recipe (no spec field): adamw_8bit, from bitsandbytes 0.50.2 in the "
        "trainer-cuda:0.1.0 image",
    )
    assert settings_from_job(job, image=image).optim == "adamw_8bit"


def test_an_image_without_bitsandbytes_gets_the_portable_optimizer_and_says_which_image() -> None:
    job = example_job("lora-single-gpu", image="ghcr.io/grpo-operator/trainer-cpu:0.1.0")
    image = for_job(job)
    assert settings_from_job(job, image=image).optim == "adamw_torch"
    assert reasons(job, image=image)["optim"] == (
        "adamw_torch: the single-GPU LoRA recipe's adamw_8bit needs bitsandbytes, which the "
        "trainer-cpu:0.1.0 image does not have"
    )


def test_a_cpu_job_trains_with_adamw_torch_whatever_the_image_holds() -> None:
    job = example_job("colours-cpu")
    assert optimizer(job, running(job, {"GRPO_IMAGE_FLAVOUR": "cuda"}))[0] == "adamw_torch"
    assert manifest("cuda").has("bitsandbytes")
