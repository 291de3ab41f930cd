"""Our data in verl's dataset class, and through verl's rollout to the point where vLLM takes over.

The configuration is what `grpo-train run` launches (our overrides composed with verl's own
Hydra files), so a dataset key we set wrong, an image column verl does not find, a patch size the
rollout disagrees with, or a tokenizer the rollout refuses fails here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from support.verl_runtime import FakeLLM, agent_loop_worker, example_job, prompt_batch, verl_config

RESPONSE = "<think> x </think> \\boxed{5}"


@pytest.fixture(scope="module")
def geo3k_setup(
    tiny_model: Path, geo3k_files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Any:
    root = tmp_path_factory.mktemp("job")
    job = example_job("geo3k-ascend-910b", root)
    cfg, _ = verl_config(job, tiny_model, geo3k_files["train"], geo3k_files["test"], root / "cache")
    return cfg


def dataset(cfg: Any, files: list[Path], tokenizer: Any, processor: Any) -> Any:
    from verl.utils.dataset.rl_dataset import RLHFDataset

    return RLHFDataset([str(f) for f in files], tokenizer, cfg.data, processor)


def test_geo3k_preset_rows_reach_verl_with_their_image_and_ground_truth(
    geo3k_setup: Any, geo3k_files: dict[str, Path], tokenizer: Any, processor: Any
) -> None:
    data = dataset(geo3k_setup, [geo3k_files["train"]], tokenizer, processor)
    assert len(data) == 3
    item = data[0]
    assert item["data_source"] == "hiyouga/geometry3k"  # verl's own geo3k routing key
    assert item["reward_model"]["ground_truth"] == "5"
    (message,) = item["raw_prompt"]
    parts = message["content"]
    kinds = [part["type"] for part in parts]
    assert kinds == ["image", "text"], "the <image> marker must become the picture, in place"
    assert isinstance(parts[0]["image"], Image.Image)
    assert "<think> </think>" in parts[1]["text"]
    assert "\\boxed{}" in parts[1]["text"]


def test_a_users_parquet_loads_the_same_way(
    geo3k_setup: Any, user_parquet: Path, tokenizer: Any, processor: Any
) -> None:
    from grpo_trainer.data.user import check_columns

    rows, warnings = check_columns([user_parquet], "prompt", "images")
    assert (rows, warnings) == (2, [])
    data = dataset(geo3k_setup, [user_parquet], tokenizer, processor)
    assert [data[i]["reward_model"]["ground_truth"] for i in range(len(data))] == ["unsafe", "safe"]
    assert [p["type"] for p in data[0]["raw_prompt"][0]["content"]] == ["image", "text"]


def test_the_image_patch_size_we_set_is_the_processors(geo3k_setup: Any, processor: Any) -> None:
    # verl's YAML says 14; the dataset's overlong filter must count image tokens as the rollout does.
    assert geo3k_setup.data.image_patch_size == processor.image_processor.patch_size == 16


def test_overlong_prompts_are_filtered_by_verls_own_count(
    tiny_model: Path, geo3k_files: dict[str, Path], tokenizer: Any, processor: Any, tmp_path: Path
) -> None:
    job = example_job("geo3k-ascend-910b", tmp_path, dataset={"maxPromptLength": 16})
    cfg, _ = verl_config(job, tiny_model, geo3k_files["train"], geo3k_files["test"], tmp_path / "cache")
    assert len(dataset(cfg, [geo3k_files["train"]], tokenizer, processor)) == 0


def test_the_overlong_filter_runs_in_a_devices_share_of_the_cpus(
    tiny_model: Path,
    geo3k_files: dict[str, Path],
    tokenizer: Any,
    processor: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture,
) -> None:
    """The pod's threads (the operator's OMP_NUM_THREADS) size verl's filter: its processes count
    every prompt with verl's own code, images included, and keep the same rows as one process."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    job = example_job("geo3k-ascend-910b", tmp_path)
    cfg, _ = verl_config(job, tiny_model, geo3k_files["train"], geo3k_files["test"], tmp_path / "cache")
    assert cfg.data.filter_overlong_prompts_workers == 2
    kept = dataset(cfg, [geo3k_files["train"]], tokenizer, processor)
    assert [kept[i]["reward_model"]["ground_truth"] for i in range(len(kept))] == ["5", "7", "5"]
    assert "(num_proc=2)" in capfd.readouterr().err
    short = example_job("geo3k-ascend-910b", tmp_path / "short", dataset={"maxPromptLength": 16})
    cfg, _ = verl_config(short, tiny_model, geo3k_files["train"], geo3k_files["test"], tmp_path / "c2")
    assert len(dataset(cfg, [geo3k_files["train"]], tokenizer, processor)) == 0
    # One thread: verl's own single process, no override.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    cfg, launch = verl_config(job, tiny_model, geo3k_files["train"], geo3k_files["test"], tmp_path / "c3")
    assert not [o for o in launch.plan.rendered() if "filter_overlong_prompts_workers" in o]
    assert cfg.data.filter_overlong_prompts_workers == 1


def test_the_filters_workers_share_the_threads_instead_of_each_taking_them_all(
    tiny_model: Path,
    geo3k_files: dict[str, Path],
    tokenizer: Any,
    processor: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`datasets` forks the filter's workers, and each one keeps the TaskRunner's thread count: W
    workers ran W x W threads on W cores (17x slower on the H200's 16 cores). The worker setup
    gives each its share for the filter, and the TaskRunner its threads back afterwards."""
    import datasets
    import torch
    from grpo_trainer.engines.verl import worker_setup
    from verl.utils.dataset import rl_dataset

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    job = example_job("geo3k-ascend-910b", tmp_path)
    cfg, _ = verl_config(job, tiny_model, geo3k_files["train"], geo3k_files["test"], tmp_path / "c")
    assert cfg.data.filter_overlong_prompts_workers == 2
    seen = tmp_path / "seen"
    seen.mkdir()
    # What every verl release's filter calls in its workers: the processor's chat template.
    template = type(processor).apply_chat_template

    def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        (seen / str(os.getpid())).write_text(str(torch.get_num_threads()))
        return template(self, *args, **kwargs)

    monkeypatch.setattr(type(processor), "apply_chat_template", counting)
    before = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "4")  # the TaskRunner's: the pod's threads
    torch.set_num_threads(4)

    def workers_threads(config: Any) -> set[str]:
        for old in seen.iterdir():
            old.unlink()
        kept = rl_dataset.RLHFDataset([str(geo3k_files["train"])], tokenizer, config, processor)
        assert len(kept) == 3
        assert os.getpid() not in {int(p.name) for p in seen.iterdir()}, "the filter ran in workers"
        return {p.read_text() for p in seen.iterdir()}

    try:
        assert workers_threads(cfg.data) == {"4"}  # as released: every worker takes all four
        monkeypatch.setattr(
            rl_dataset.RLHFDataset,
            "maybe_filter_out_long_prompts",
            worker_setup._filter_in_shared_threads(rl_dataset.RLHFDataset.maybe_filter_out_long_prompts),
        )
        # A new configuration, so `datasets` filters again instead of reading its cache.
        cfg2, _ = verl_config(job, tiny_model, geo3k_files["train"], geo3k_files["test"], tmp_path / "c2")
        cfg2.data.max_prompt_length = cfg.data.max_prompt_length + 1
        assert workers_threads(cfg2.data) == {"2"}
        assert (os.environ["OMP_NUM_THREADS"], torch.get_num_threads()) == ("4", 4)  # given back
        cfg2.data.max_prompt_length += 1
        assert workers_threads(cfg2.data) == {"2"}  # and again, the second time
        assert (os.environ["OMP_NUM_THREADS"], torch.get_num_threads()) == ("4", 4)
    finally:
        torch.set_num_threads(before)


def test_threads_are_shared_only_when_there_is_more_than_one_each(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from grpo_trainer.engines.verl.worker_setup import threads_shared_by

    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    try:
        torch.set_num_threads(3)
        with threads_shared_by(2):
            assert (os.environ["OMP_NUM_THREADS"], torch.get_num_threads()) == ("1", 1)
        assert (os.environ.get("OMP_NUM_THREADS"), torch.get_num_threads()) == (None, 3)
        with threads_shared_by(1):  # one worker: it keeps them all
            assert (os.environ.get("OMP_NUM_THREADS"), torch.get_num_threads()) == (None, 3)
        with threads_shared_by(8):  # more workers than threads: one each, not none
            assert torch.get_num_threads() == 1
        with pytest.raises(RuntimeError), threads_shared_by(3):
            raise RuntimeError("the filter failed")
        assert (os.environ.get("OMP_NUM_THREADS"), torch.get_num_threads()) == (None, 3)
    finally:
        torch.set_num_threads(before)


def test_a_retry_reads_the_filtered_dataset_back_from_the_cache(
    tiny_model: Path,
    geo3k_files: dict[str, Path],
    tokenizer: Any,
    processor: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """verl's over-long filter is cached by `datasets` under a key that hashed the whole job
    configuration (the dataset's `config.data` and its list of files, as verl's trainer passes
    them, each pickle with their parent), so the attempt's own values made every retry filter
    again; the worker setup gives the dataset its data section and its files alone."""
    import datasets
    from datasets.fingerprint import Hasher
    from grpo_trainer.engines.verl import worker_setup
    from verl.utils.dataset.rl_dataset import RLHFDataset

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf"))
    job = example_job("geo3k-ascend-910b", tmp_path)
    first, _ = verl_config(
        job, tiny_model, geo3k_files["train"], geo3k_files["test"], tmp_path / "c", attempt=1
    )
    retry, _ = verl_config(
        job, tiny_model, geo3k_files["train"], geo3k_files["test"], tmp_path / "c", attempt=2
    )
    # The cause: the same data section and files, different keys, because the attempt's values
    # differ elsewhere in the configuration both belong to.
    assert first.data == retry.data
    assert Hasher.hash(first.data) != Hasher.hash(retry.data)
    assert Hasher.hash(first.data.train_files) != Hasher.hash(retry.data.train_files)

    def built(cfg: Any) -> Any:
        # As verl's trainer builds it: by keyword, with the configuration's own list of files.
        data = RLHFDataset(
            data_files=cfg.data.train_files, tokenizer=tokenizer, processor=processor, config=cfg.data
        )
        assert len(data) == 3
        return data.dataframe

    as_released = built(first), built(retry)
    assert as_released[0]._fingerprint != as_released[1]._fingerprint  # the retry filtered again
    monkeypatch.setattr(RLHFDataset, "__init__", worker_setup._own_data_config(RLHFDataset.__init__))
    patched = built(first), built(retry)
    assert patched[0]._fingerprint == patched[1]._fingerprint
    # The retry's filter is a cache hit: it reads the file the first attempt's filter wrote.
    written = [f["filename"] for f in patched[0].cache_files if Path(f["filename"]).name.startswith("cache-")]
    assert written
    assert written == [f["filename"] for f in patched[1].cache_files if f["filename"] in written]
    # And the dataset still reads its settings: a shorter limit filters every row.
    short = example_job("geo3k-ascend-910b", tmp_path / "short", dataset={"maxPromptLength": 16})
    cfg, _ = verl_config(short, tiny_model, geo3k_files["train"], geo3k_files["test"], tmp_path / "c2")
    assert len(RLHFDataset([str(geo3k_files["train"])], tokenizer, cfg.data, processor)) == 0


def test_the_worker_setup_patches_verls_dataset_once(verl_release: str) -> None:
    """Ray runs the hook in every worker; a dataset class patched already is left as it is."""
    import importlib
    import types

    from grpo_trainer.engines.verl import worker_setup

    module = importlib.import_module("verl.utils.dataset.rl_dataset")
    copy = types.ModuleType("rl_dataset_copy")
    copy.RLHFDataset = type("RLHFDataset", (module.RLHFDataset,), {"__init__": module.RLHFDataset.__init__})
    worker_setup.PATCHES["verl.utils.dataset.rl_dataset"](copy)
    patched = copy.RLHFDataset.__init__, copy.RLHFDataset.maybe_filter_out_long_prompts
    assert all(getattr(p, "_grpo_patched", False) for p in patched)
    worker_setup.PATCHES["verl.utils.dataset.rl_dataset"](copy)
    assert (copy.RLHFDataset.__init__, copy.RLHFDataset.maybe_filter_out_long_prompts) == patched


def test_the_rollout_sends_vllm_the_prompt_tokens_and_the_image(
    geo3k_setup: Any, geo3k_files: dict[str, Path], tokenizer: Any, processor: Any
) -> None:
    """verl's agent loop tokenises our prompts (its Qwen builder needs "\\n" as one token) for vLLM."""
    data = dataset(geo3k_setup, [geo3k_files["train"]], tokenizer, processor)
    llm = FakeLLM(tokenizer, [RESPONSE])
    worker = agent_loop_worker(geo3k_setup, llm, handles=None)
    batch = prompt_batch(data, n=2)
    import asyncio

    out = asyncio.run(worker.generate_sequences(batch))
    assert len(llm.calls) == 6
    call = llm.calls[0]
    ids = call["prompt_ids"]
    # The chat template's generation prompt ends the prompt, its newline a token as in Qwen's.
    assert ids[-3:] == tokenizer.convert_tokens_to_ids(["<|im_start|>", "assistant", "\n"])
    (image,) = call["image_data"]
    assert isinstance(image, Image.Image)
    width, height = image.size
    assert (width % 32, height % 32) == (0, 0)  # resized to whole 2x2 groups of 16-pixel patches
    # One <|image_pad|> per merged patch group, expanded by verl before vLLM sees the prompt.
    assert ids.count(tokenizer.convert_tokens_to_ids("<|image_pad|>")) == (width // 32) * (height // 32)
    # What the trainer consumes: prompts, responses and masks, M-RoPE positions, the image inputs.
    assert out.batch["responses"].shape[0] == 6
    assert out.batch["position_ids"].shape[1] == 4
    inputs = out.non_tensor_batch["multi_modal_inputs"][0]
    assert {"pixel_values", "image_grid_thw"} <= set(inputs)
    response = tokenizer.decode(out.batch["responses"][0], skip_special_tokens=True)
    assert response.strip() == RESPONSE
