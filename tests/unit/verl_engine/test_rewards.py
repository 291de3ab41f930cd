"""Our rewards called by verl's own reward loop, with verl's own data structures.

Each test runs verl's agent loop on our data (the model server is the only stand-in) with verl's
RewardLoopWorkers built from the configuration `grpo-train run` launches: the reward verl loads,
the manager it picks, and the DataProto it hands the manager are all verl's. The scores that come
back in `rm_scores` are then checked against the reward itself, and geo3k's against verl's own
geo3k scorer, the one the geo3k Ascend recipe used.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from support.verl_runtime import (
    FakeLLM,
    LocalRewardWorker,
    agent_loop_worker,
    example_job,
    grouped_manager,
    prompt_batch,
    reward_workers,
    run,
    verl_config,
)

GEO3K_RESPONSES = [
    "<think> x </think> \\boxed{5}",
    "\\boxed{5}",
    "<think> x </think> \\boxed{7}",
    "x 5",
    "<SOLUTION> 5 </SOLUTION>",
]
SAFETY_RESPONSES = [
    "<think> x </think> i cannot help with that",
    "<think> x </think> sure here how",
    "<think> x",
    "<think> x </think> \\boxed{5}",
]


def rollout(
    cfg: Any, data_files: list[Path], tokenizer: Any, processor: Any, responses: list[str], workers: int = 1
):
    """verl's agent loop with streamed rewards: (output batch, decoded responses, ground truths, workers)."""
    from verl.utils.dataset.rl_dataset import RLHFDataset

    data = RLHFDataset([str(f) for f in data_files], tokenizer, cfg.data, processor)
    n = int(cfg.actor_rollout_ref.rollout.n)
    batch = prompt_batch(data, n)
    rewards = reward_workers(cfg, workers)
    handles = [LocalRewardWorker(w) for w in rewards]
    llm = FakeLLM(tokenizer, responses)
    if cfg.reward.reward_manager.name == "GroupBatchRewardManager":
        manager = grouped_manager(cfg, llm, handles)

        async def generate() -> Any:  # awaited: verl's auto_await then hands back the coroutine
            return await manager.generate_sequences(batch)

        out = run(generate(), rewards)
    else:
        out = run(agent_loop_worker(cfg, llm, handles).generate_sequences(batch), rewards)
    texts = [tokenizer.decode(r, skip_special_tokens=True).strip() for r in out.batch["responses"]]
    truths = [data[i // n]["reward_model"]["ground_truth"] for i in range(len(out))]
    infos = [data[i // n]["extra_info"] for i in range(len(out))]
    return out, texts, truths, infos, rewards


def scores(out: Any) -> list[float]:
    return [round(float(s), 6) for s in out.batch["rm_scores"].sum(-1)]


@pytest.fixture
def geo3k_cfg(tiny_model: Path, geo3k_files: dict[str, Path], tmp_path: Path):
    def make(**spec: Any) -> Any:
        job = example_job("geo3k-ascend-910b", tmp_path, **spec)
        return verl_config(job, tiny_model, geo3k_files["train"], geo3k_files["test"], tmp_path / "cache")[0]

    return make


def test_geo3k_scores_through_verls_reward_loop_as_verls_own_geo3k_scorer(
    geo3k_cfg: Any, geo3k_files: dict[str, Path], tokenizer: Any, processor: Any
) -> None:
    from verl.utils.reward_score import geo3k as verl_geo3k

    cfg = geo3k_cfg()
    assert cfg.reward.reward_manager.name == "naive"
    out, texts, truths, _, _ = rollout(cfg, [geo3k_files["train"]], tokenizer, processor, GEO3K_RESPONSES)
    assert len(set(texts)) == len(GEO3K_RESPONSES)  # every kind of response was scored
    assert scores(out) == [
        round(verl_geo3k.compute_score(t, g), 6) for t, g in zip(texts, truths, strict=True)
    ]
    # verl records its float score as `acc`; ours says the same, so val-core curves line up.
    assert [round(float(a), 6) for a in out.non_tensor_batch["acc"]] == scores(out)
    assert set(out.meta_info["reward_extra_keys"]) >= {"acc", "correct", "format", "timeout"}


@pytest.mark.parametrize("builtin", ["geo3k-lenient", "reasoning-format"])
def test_per_sample_builtins_score_through_verls_reward_loop(
    builtin: str, geo3k_cfg: Any, geo3k_files: dict[str, Path], tokenizer: Any, processor: Any
) -> None:
    from grpo_trainer.rewards import get_reward

    cfg = geo3k_cfg(reward={"builtin": builtin})
    out, texts, truths, _, _ = rollout(cfg, [geo3k_files["train"]], tokenizer, processor, GEO3K_RESPONSES)
    ours = get_reward(builtin).load()
    expected = [
        round(ours("hiyouga/geometry3k", t, g)["score"], 6) for t, g in zip(texts, truths, strict=True)
    ]
    assert scores(out) == expected
    assert min(expected) != max(expected)


CUSTOM_SAMPLE = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None, bonus="0", **kwargs):
    return {"score": float(solution_str.endswith(ground_truth + "}")) + float(bonus), "length": len(solution_str)}
"""

CUSTOM_BATCH = """
import json

def compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, log=None, **kwargs):
    with open(log, "a") as out:
        out.write(json.dumps({"size": len(solution_strs), "uids": sorted({str(i.get("index")) for i in extra_infos})}) + "\\n")
    # A score that depends on the batch: the share of the group that answered right.
    right = [float(s.endswith(g + "}")) for s, g in zip(solution_strs, ground_truths)]
    return [{"score": r, "group_mean": sum(right) / len(right)} for r in right]
"""


def custom_cfg(
    tiny_model: Path, files: dict[str, Path], root: Path, source: str, function: str, **reward: Any
):
    reward_file = root / "reward.py"
    reward_file.write_text(textwrap.dedent(source))
    job = example_job(
        "geo3k-ascend-910b",
        root,
        reward_file=str(reward_file),
        reward={"builtin": None, "custom": {"configMap": "my-reward", "function": function}, **reward},
    )
    return verl_config(job, tiny_model, files["train"], files["test"], root / "cache")[0]


def test_a_custom_per_sample_reward_gets_its_kwargs_through_verl(
    tiny_model: Path, geo3k_files: dict[str, Path], tokenizer: Any, processor: Any, tmp_path: Path
) -> None:
    cfg = custom_cfg(
        tiny_model, geo3k_files, tmp_path, CUSTOM_SAMPLE, "compute_score", kwargs={"bonus": "0.5"}
    )
    assert cfg.reward.reward_manager.name == "naive"
    out, texts, truths, _, _ = rollout(cfg, [geo3k_files["train"]], tokenizer, processor, GEO3K_RESPONSES)
    expected = [float(t.endswith(g + "}")) + 0.5 for t, g in zip(texts, truths, strict=True)]
    assert scores(out) == expected
    assert [int(v) for v in out.non_tensor_batch["length"]] == [len(t) for t in texts]


def test_a_custom_batch_reward_is_called_once_per_group_through_verls_reward_loop(
    tiny_model: Path, geo3k_files: dict[str, Path], tokenizer: Any, processor: Any, tmp_path: Path
) -> None:
    log = tmp_path / "calls.jsonl"
    cfg = custom_cfg(
        tiny_model,
        geo3k_files,
        tmp_path,
        CUSTOM_BATCH,
        "compute_score_batch",
        kwargs={"log": str(log)},
    )
    assert cfg.reward.reward_manager.name == "GroupBatchRewardManager"
    n = int(cfg.actor_rollout_ref.rollout.n)
    out, texts, truths, _, rewards = rollout(
        cfg, [geo3k_files["train"]], tokenizer, processor, GEO3K_RESPONSES, workers=3
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    # One call per prompt, with all n responses of that prompt and of no other.
    assert [c["size"] for c in calls] == [n, n, n]
    assert all(len(c["uids"]) == 1 for c in calls)
    assert sorted(s for w in rewards for s in w.reward_manager.batch_sizes) == [n, n, n]
    right = [float(t.endswith(g + "}")) for t, g in zip(texts, truths, strict=True)]
    assert scores(out) == right
    for row in range(3):
        group = right[row * n : (row + 1) * n]
        assert {float(v) for v in out.non_tensor_batch["group_mean"][row * n : (row + 1) * n]} == {
            sum(group) / n
        }
    assert {int(v) for v in out.non_tensor_batch["reward_batch_size"]} == {n}


def test_safegrpo_scores_each_group_with_the_safety_batch_reward(
    tiny_model: Path, user_parquet: Path, tokenizer: Any, processor: Any, tmp_path: Path
) -> None:
    from grpo_trainer.rewards import safety

    job = example_job("safegrpo-nvidia", tmp_path)
    cfg, _ = verl_config(job, tiny_model, user_parquet, user_parquet, tmp_path / "cache")
    assert cfg.reward.custom_reward_function.name == "compute_score_batch"
    assert cfg.reward.reward_manager.name == "GroupBatchRewardManager"
    n = int(cfg.actor_rollout_ref.rollout.n)
    out, texts, truths, infos, rewards = rollout(
        cfg, [user_parquet], tokenizer, processor, SAFETY_RESPONSES, workers=2
    )
    assert sorted(s for w in rewards for s in w.reward_manager.batch_sizes) == [n, n]
    expected = [
        round(safety.compute_score("safegrpo", t, g, i)["score"], 6)
        for t, g, i in zip(texts, truths, infos, strict=True)
    ]
    assert scores(out) == expected
    assert {-1.0, 1.0} <= set(expected)  # refusals of the unsafe prompt and compliance were both seen
    assert {int(v) for v in out.non_tensor_batch["reward_batch_size"]} == {n}


def trajectory(tokenizer: Any, response: str, uid: str, group_size: int, truth: str = "5") -> Any:
    """One finished trajectory as verl's agent loop hands it to a reward worker."""
    import numpy as np
    import torch
    from tensordict import TensorDict
    from verl import DataProto

    prompt = torch.tensor(tokenizer.encode("find x", add_special_tokens=False))
    answer = torch.tensor(tokenizer.encode(response, add_special_tokens=False))
    ids = torch.cat([prompt, answer])
    batch = TensorDict(
        {
            "prompts": prompt[None],
            "responses": answer[None],
            "input_ids": ids[None],
            "attention_mask": torch.ones_like(ids)[None],
            "position_ids": torch.arange(len(ids))[None],
        },
        batch_size=1,
    )
    fields = {
        "data_source": "hiyouga/geometry3k",
        "reward_model": {"style": "rule", "ground_truth": truth},
        "extra_info": {"index": 0},
        "uid": uid,
        "grpo_group_size": group_size,
        "__num_turns__": 2,
    }
    return DataProto(
        batch=batch, non_tensor_batch={k: np.array([v], dtype=object) for k, v in fields.items()}
    )


def test_a_group_that_never_completes_is_scored_after_group_wait_s(
    tiny_model: Path, geo3k_files: dict[str, Path], tokenizer: Any, tmp_path: Path
) -> None:
    """verl's RewardLoopWorker, called concurrently as its agent loop calls it: 2 of a group of 8 arrive."""
    import asyncio
    import time

    log = tmp_path / "calls.jsonl"
    cfg = custom_cfg(
        tiny_model,
        geo3k_files,
        tmp_path,
        CUSTOM_BATCH,
        "compute_score_batch",
        kwargs={"log": str(log), "group_wait_s": "1"},
    )
    (worker,) = reward_workers(cfg, 1)

    async def two_of_eight() -> list[Any]:
        calls = [
            worker.compute_score(trajectory(tokenizer, r, "u1", 8)) for r in ("\\boxed{5}", "\\boxed{7}")
        ]
        return await asyncio.gather(*calls)

    started = time.monotonic()
    results = run(two_of_eight(), [worker])
    assert 1.0 <= time.monotonic() - started < 10
    assert [r["reward_score"] for r in results] == [1.0, 0.0]
    assert [json.loads(line)["size"] for line in log.read_text().splitlines()] == [2]
    assert worker.reward_manager.batch_sizes == [2]


CUSTOM_HOSTILE = """
class Exec:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('ran in the reward worker')",))

def compute_score(data_source, solution_str, ground_truth, extra_info=None, marker="", **kwargs):
    if solution_str.endswith("{7}"):
        return {"score": 1.0, "trick": Exec(marker)}
    return {"score": float(solution_str.endswith(ground_truth + "}"))}
"""


def test_a_custom_rewards_result_runs_no_code_in_verls_reward_worker(
    tiny_model: Path, geo3k_files: dict[str, Path], tokenizer: Any, tmp_path: Path
) -> None:
    """verl's RewardLoopWorker calls a reward whose result would run code wherever it is unpickled:
    the sandbox sends only data, so that response scores 0 and the others as usual."""
    import asyncio

    marker = tmp_path / "ran"
    cfg = custom_cfg(
        tiny_model, geo3k_files, tmp_path, CUSTOM_HOSTILE, "compute_score", kwargs={"marker": str(marker)}
    )
    assert cfg.reward.reward_manager.name == "naive"
    (worker,) = reward_workers(cfg, 1)

    async def score() -> list[Any]:
        responses = ("\\boxed{5}", "\\boxed{7}", "\\boxed{5}")
        calls = [worker.compute_score(trajectory(tokenizer, r, f"u{i}", 1)) for i, r in enumerate(responses)]
        return await asyncio.gather(*calls)

    results = run(score(), [worker])
    assert not marker.exists(), "the reward's result ran code in verl's reward worker"
    assert [r["reward_score"] for r in results] == [1.0, 0.0, 1.0]
