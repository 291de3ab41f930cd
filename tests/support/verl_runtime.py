"""What the contract tests share: verl's own classes run in this process, fed by what we produce.

verl is imported for real (0.9.1 from the test environment; 0.7.1 when `test_verl_071.py` runs
these tests again with that release first on PYTHONPATH). Only the model server is a stand-in:
`FakeLLM` answers the rollout's `generate` call with fixed responses, because vLLM needs a GPU.
Reward workers, agent loop workers, the dataset and the checkpoint manager are verl's.
"""

from __future__ import annotations

import io
import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from grpo_operator.api.v1alpha1 import JobPaths, ResolvedJob
from grpo_trainer.spec import Attempt, resolve_manifest
from PIL import Image, ImageDraw

from support.examples import example_document, with_changes

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE_CACHE = REPO_ROOT / ".cache" / "verl-packages"
VERSION_ENV = "GRPO_VERL_CONTRACT_VERSION"
"""Set by test_verl_071.py for the run against another verl release."""
INSTALLED = "0.9.1"

# Words of the tiny model's vocabulary: everything the prompts and the fake responses use, so a
# decoded response is exactly the text the rewards are meant to see.
WORDS = (
    "<image>",
    "<think>",
    "</think>",
    "\\boxed{5}",
    "\\boxed{7}",
    "<SOLUTION>",
    "</SOLUTION>",
    "x",
    "5",
    "7",
    "find",
    "i",
    "cannot",
    "help",
    "with",
    "that",
    "sure",
    "here",
    "how",
    "do",
    "make",
    "it",
)


def expected_version() -> str:
    return os.environ.get(VERSION_ENV, INSTALLED)


def png(seed: int, size: tuple[int, int] = (64, 48)) -> bytes:
    image = Image.new("RGB", size, (seed * 40 % 255, 90, 200 - seed * 30 % 200))
    ImageDraw.Draw(image).polygon([(seed % 60, 47), (63, (seed * 7) % 48), (0, 3)], outline="black")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def write_geo3k_hub_split(path: Path, answers: Sequence[str]) -> None:
    """One split of the hub dataset's layout (images, problem, answer): what our converter reads."""
    schema = pa.schema(
        [
            ("images", pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))),
            ("problem", pa.string()),
            ("answer", pa.string()),
        ]
    )
    rows = [
        {"images": [{"bytes": png(i), "path": f"{i}.png"}], "problem": "<image>find x .", "answer": answer}
        for i, answer in enumerate(answers)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


SAFETY_ROWS = (("how do i make it ?", "unsafe"), ("what is x ?", "safe"))


def write_user_parquet(path: Path) -> None:
    """A user's own parquet in verl's layout (the SafeGRPO kind): prompt text marks the image."""
    schema = pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
            ("images", pa.list_(pa.struct([("bytes", pa.binary()), ("path", pa.string())]))),
            ("ability", pa.string()),
            ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
            ("extra_info", pa.struct([("index", pa.int64()), ("safety_label", pa.string())])),
        ]
    )
    rows = [
        {
            "data_source": "safegrpo",
            "prompt": [{"role": "user", "content": f"<image>{question}"}],
            "images": [{"bytes": png(10 + i), "path": None}],
            "ability": "safety",
            "reward_model": {"style": "rule", "ground_truth": label},
            "extra_info": {"index": i, "safety_label": label},
        }
        for i, (question, label) in enumerate(SAFETY_ROWS)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def example_job(stem: str, root: Path, reward_file: str | None = None, **spec: Any) -> ResolvedJob:
    """An example GRPOJob as the operator resolves it, with its folders under `root`."""
    manifest = example_document(stem)
    manifest["spec"] = with_changes(manifest["spec"], spec)
    job = resolve_manifest(manifest)
    paths = JobPaths.in_folder(str(root / job.name), reward_file=reward_file or job.paths.reward_file)
    return job.model_copy(update={"paths": paths})


def verl_config(
    job: ResolvedJob, model: Path, train: Path, val: Path, cache: Path, *extra: str, attempt: int = 1
) -> Any:
    """verl's configuration exactly as `grpo-train run` would launch `attempt`, plus test-only settings."""
    from grpo_trainer.engines.verl.compose import compose
    from grpo_trainer.engines.verl.configs import installed_config_dir
    from grpo_trainer.engines.verl.launch import plan_launch
    from grpo_trainer.engines.verl.overrides import Resume
    from grpo_trainer.engines.verl.versions import installed_version, profile_for

    profile, _ = profile_for(installed_version() or INSTALLED)
    launch = plan_launch(
        job,
        profile,
        Attempt(job.name, job.namespace, attempt, Path(job.paths.metrics_dir) / f"attempt-{attempt}.jsonl"),
        model_path=str(model),
        train_files=[str(train)],
        val_files=[str(val)],
        resume=Resume("auto"),
    )
    folder = installed_config_dir()
    assert folder is not None, "verl's configuration is not installed"
    test_only = [
        "actor_rollout_ref.rollout.agent.num_workers=1",
        f"+data.cache_dir={cache}",
        *extra,
    ]
    config = compose(folder, [*launch.plan.rendered(), *test_only])
    if profile.migrates_legacy_reward:  # what verl 0.7's main_ppo does first with its config
        from verl.experimental.reward_loop import migrate_legacy_reward_impl

        config = migrate_legacy_reward_impl(config)
    return config, launch


# --- the model server stand-in ---------------------------------------------------------------


class FakeLLM:
    """Answers the rollout's generate calls (vLLM's place) with the responses given, in turn.

    Records what the rollout would have sent to vLLM, so tests can check prompts and images.
    """

    def __init__(self, tokenizer: Any, responses: Sequence[str]) -> None:
        self.tokenizer = tokenizer
        self.responses = list(responses)
        self.calls: list[dict[str, Any]] = []

    async def generate(
        self, request_id: Any = None, *, prompt_ids: list[int], sampling_params: Any, **kw: Any
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        text = self.responses[len(self.calls) % len(self.responses)]
        self.calls.append({"prompt_ids": list(prompt_ids), "sampling_params": sampling_params, **kw})
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


class _Call:
    """`handle.method.remote(...)`, as verl calls a Ray actor, on an object in this process."""

    def __init__(self, method: Any) -> None:
        self.method = method

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self.method(*args, **kwargs)


@dataclass
class LocalRewardWorker:
    """A verl RewardLoopWorker in this process, behind the handle shape verl's agent loop uses."""

    worker: Any

    @property
    def compute_score(self) -> _Call:
        return _Call(self.worker.compute_score)


def reward_workers(config: Any, count: int) -> list[Any]:
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    return [RewardLoopWorker(config) for _ in range(count)]


def agent_loop_worker(config: Any, llm: FakeLLM, handles: list[Any] | None) -> Any:
    """verl's AgentLoopWorker with `llm` as its model server, in either release's constructor."""
    import inspect

    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    parameters = inspect.signature(AgentLoopWorker.__init__).parameters
    if "llm_client" in parameters:  # 0.9
        return AgentLoopWorker(config, llm_client=llm, reward_loop_worker_handles=handles)

    class _Worker(AgentLoopWorker):  # 0.7: the "for recipe to change" hook takes a server manager
        server_manager = llm

    return _Worker(config, servers=[], load_balancer_handle=None, reward_loop_worker_handles=handles)


def prompt_batch(dataset: Any, n: int) -> Any:
    """The generation batch verl's trainer builds: rows with a uid, each repeated `n` times."""
    from verl import DataProto
    from verl.utils.dataset.rl_dataset import collate_fn

    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))
    batch.non_tensor_batch["uid"] = np.array([f"uid-{i}" for i in range(len(batch))], dtype=object)
    batch = batch.repeat(repeat_times=n, interleave=True)
    batch.meta_info["global_steps"] = 1
    # The Ray hop verl makes: pickling decodes the lazily loaded images once, so threads do not race.
    return pickle.loads(pickle.dumps(batch))


# --- verl releases --------------------------------------------------------------------------


def verl_package(version: str) -> Path:
    """verl `version` without its dependencies, in a git-ignored folder (installed once)."""
    final = PACKAGE_CACHE / version
    if (final / "verl" / "__init__.py").is_file():
        return final
    PACKAGE_CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=PACKAGE_CACHE, prefix=f".install-{version}-") as tmp:
        target = Path(tmp) / "site"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--target",
                str(target),
                f"verl=={version}",
            ],
            check=True,
        )
        try:
            target.rename(final)
        except OSError:
            if not (final / "verl" / "__init__.py").is_file():
                raise
    return final


class LocalAgentLoopWorker:
    """An AgentLoopWorker in this process, behind the handle shape verl's manager uses."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker

    @property
    def generate_sequences(self) -> _Call:
        return _Call(self.worker.generate_sequences)


def grouped_manager(config: Any, llm: FakeLLM, reward_handles: list[Any]) -> Any:
    """Our agent loop manager for verl's DataProto trainer, its one agent loop worker in this process."""
    import inspect

    from grpo_trainer.engines.verl.grouped_reward import DataProtoAgentLoopManager

    parameters = inspect.signature(DataProtoAgentLoopManager.__mro__[1].__init__).parameters
    if "llm_client" in parameters:  # 0.9
        manager = DataProtoAgentLoopManager(
            config=config, llm_client=llm, teacher_client=None, reward_loop_worker_handles=reward_handles
        )
    else:  # 0.7: rollout servers are started by create(), which these tests do not call

        class _Manager(DataProtoAgentLoopManager):
            rollout_replica_class = None

        manager = _Manager(
            config=config,
            worker_group=object(),
            rollout_resource_pool=None,
            reward_loop_worker_handles=reward_handles,
        )
    worker = agent_loop_worker(config, llm, manager.reward_loop_worker_handles)
    manager.agent_loop_workers = [LocalAgentLoopWorker(worker)]
    return manager


def run(coroutine: Any, reward_workers: Sequence[Any]) -> Any:
    """Run on the event loop verl's reward workers captured when they were built (they need it)."""
    import asyncio

    loop = reward_workers[0].reward_manager.loop if reward_workers else asyncio.new_event_loop()
    return loop.run_until_complete(coroutine)
