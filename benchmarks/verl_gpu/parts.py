"""The parts `start` runs: tiny and shapes-4b through `grpo-train run`, raw-4b as verl's own main_ppo."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from grpo_operator.api.contract import COMPLETE_FILE

from benchmarks import paths

from . import machine
from .attempts import PARTS, Attempt, folder_name, launch, metrics_name
from .inputs import ATTENTION, build_geo3k, build_model, custom_batch_reward, spec, write_spec
from .machine import log, write_json
from .stack import EXTRA_SITE


def grpo_train_command(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """`grpo-train ARGS` as the Ray job's entrypoint runs it (the console script is cli:main; the
    package is not installed on the GPU machine, so it runs from this checkout)."""
    entry = "import sys; from grpo_trainer.cli import main; sys.exit(main(sys.argv[1:]))"
    return [sys.executable, "-c", entry, *args], {
        "PYTHONPATH": _pythonpath(paths.REPO / "trainer", paths.REPO / "operator")
    }


def _pythonpath(*first: Path) -> str:
    rest = [os.environ.get("PYTHONPATH", "")]
    if EXTRA_SITE.is_dir():
        rest.append(str(EXTRA_SITE))  # after the stack: its packages win where both have one
    return os.pathsep.join(filter(None, [*map(str, first), *rest]))


def run_now(args: list[str], log_file: Path) -> int:
    """A short grpo-train command in the foreground (smoke checks, data preparation)."""
    command, env = grpo_train_command(args)
    log(f"$ grpo-train {' '.join(args)}")
    with log_file.open("a") as out:
        return subprocess.run(
            command, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
        ).returncode


def smoke(work: Path, job_spec: Path, out: Path) -> int:
    """Everything up to launching verl: the plan, verl's composition check, the data preparation."""
    logs = out / "smoke.log"
    codes = {
        name: run_now([name, "--spec", str(job_spec), "--workdir", str(work)], logs)
        for name in ("plan", "validate", "prepare-data")
    }
    write_json(out / "summary.json", {"ok": not any(codes.values()), "smoke": codes})
    log(f"smoke: {codes}")
    return 0 if not any(codes.values()) else 1


def tiny_sizes(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    sizes = {
        "prompt": 256,
        "response": 64,
        "group": 4,
        "batch": 8 * args.gpus,
        "mini": 4 * args.gpus,
        "micro": 4,
        "gpu_memory": 0.3,
        "eager": True,
        "save": 2,
        "export": True,
        "engine": {"strategy": args.strategy},
        "overrides": list(args.engine_override),
    }
    if args.reward == "custom-batch":
        sizes["reward"] = custom_batch_reward(work)
    return sizes


def as_a_retry(work: Path) -> None:
    """A later attempt of a finished job only exports: drop the completion mark so this one trains
    on, as a retried attempt after a crash between its last step and the end would."""
    for marker in work.rglob(COMPLETE_FILE):
        marker.unlink()


def start_tiny(args: argparse.Namespace) -> int:
    work = machine.WORK / "tiny"
    if args.attempt == 1 and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    model = build_model(work / "models" / "qwen3-vl-tiny", "tiny", args.smoke)
    data = build_geo3k(work / "geo3k-hub", train=64, test=8, side=64)
    steps = 2 * args.attempt  # attempt 1: steps 1-2; attempt 2 resumes at 3 and trains to 4
    job = write_spec(
        work / f"job-{folder_name(args.attempt)}.yaml",
        spec("verl-tiny", model, data, args.gpus, steps=steps, **tiny_sizes(args, work)),
    )
    if args.smoke:
        return smoke(work, job, args.out)
    if args.attempt > 1:
        as_a_retry(work)
    command, env = grpo_train_command(["run", "--spec", str(job), "--workdir", str(work), "--no-report"])
    launch(
        Attempt("tiny", args.attempt),
        command,
        {**env, "GRPO_ATTEMPT": str(args.attempt)},
        sample_every=args.sample_stacks,
    )
    return 0


def sizes_4b(args: argparse.Namespace) -> dict[str, Any]:
    """The SafeGRPO example's per-GPU load as far as one H200 holds it (docs/benchmarks/verl-gpu.md
    says why each departure)."""
    return {
        "prompt": 2048,
        "response": args.response_length,
        "group": 8,
        # The example's 256 prompts on 4 GPUs are 64 per GPU; one GPU steps 16 in a call's time.
        "batch": 16 * args.gpus,
        # The example's 4 updates per step (mini-batch 64 of 256).
        "mini": 4 * args.gpus,
        # The example's 16 per GPU shares the actor's fp32 state with 3 other GPUs; one GPU holds all
        # of it (~70 GB) beside vLLM.
        "micro": 4,
        "gpu_memory": 0.35 if args.gpus == 1 else 0.45,
        "eager": False,
        "rollout": {"enableChunkedPrefill": True, "freeCacheEngine": True},
        # fsdp2 for every step measured (verl's Qwen3-VL examples); `--strategy fsdp` starts the
        # examples' own, FSDP1.
        # `--actor-offload`: the geo3k recipe's actor offload, which lets a 4B step fit an H100's
        # 80 GB (a step without it used 99.6 GiB of the H200).
        "engine": {
            "refParamOffload": True,
            "strategy": args.strategy,
            "paramOffload": args.actor_offload,
            "optimizerOffload": args.actor_offload,
        },
        "algorithm": {"kl": {"coefficient": 0.01, "type": "low_var_kl", "placement": "loss"}},
        "save": 1000000,
        "export": False,
        # No checkpoint (4B weights and optimiser state: ~60 GB, minutes to write).
        "overrides": ["trainer.save_freq=-1", *args.engine_override],
    }


def threads_override(args: argparse.Namespace) -> list[str]:
    """`--omp-threads N` for raw verl: OMP_NUM_THREADS for every Ray worker of main_ppo run
    directly, whose workers otherwise get Ray's 1 (verl's workers ask for no CPUs). Ours sets each
    device's share of the machine's CPUs itself (the engine's default outside a pod; the operator's
    value in one); `--omp-threads` gives ours the same N through its environment, so a comparison
    can run both with equal threads."""
    if not args.omp_threads:
        return []
    return [f"+ray_kwargs.ray_init.runtime_env.env_vars.OMP_NUM_THREADS='{args.omp_threads}'"]


def threads_env(args: argparse.Namespace) -> dict[str, str]:
    """`--omp-threads N` for ours: the pod's value, as the operator would set it."""
    return {"OMP_NUM_THREADS": str(args.omp_threads)} if args.omp_threads else {}


DATA_ROWS_PER_GPU = 64
"""Training rows of the 4B runs per GPU (prompts per step per GPU: 16)."""


def train_rows(args: argparse.Namespace) -> int:
    """`--train-rows N` (the geo3k recipe's 2,101, to time its over-long prompt filter at its size),
    else DATA_ROWS_PER_GPU per GPU."""
    return args.train_rows or DATA_ROWS_PER_GPU * args.gpus


def inputs_4b(args: argparse.Namespace, part: str) -> tuple[Path, Path, Path]:
    """The model, data and job of a 4B run; the shapes it starts with are kept beside them for the
    summaries of later calls (which run with their own flags)."""
    work = machine.WORK / "shapes-4b"  # raw-4b runs on the same model and data
    model = build_model(work / "models" / "qwen3-vl-4b-random", "4b", args.smoke)
    # A fixed number of rows, whatever --steps is: the data (and the key of its prepared parquet)
    # must not change between ours and raw-4b run with different step counts, or the two train
    # on different batches. Four batches an epoch; later steps start another epoch.
    rows = train_rows(args)
    data = build_geo3k(
        work / f"geo3k-hub-{args.prompts}",
        train=rows,
        test=8,
        side=args.image_side,
        varied=args.prompts == "varied",
    )
    job = write_spec(
        work / f"job-{args.prompts}.yaml",
        spec("verl-4b", model, data, args.gpus, steps=args.steps, **sizes_4b(args)),
    )
    shapes = {k: v for k, v in sizes_4b(args).items() if k != "overrides"}
    write_json(
        work / f"{part}.shapes.json",
        {
            **shapes,
            "prompts": args.prompts,
            "image_side": args.image_side,
            "train_rows": rows,
        },
    )
    return work, model, job


def start_4b(args: argparse.Namespace) -> int:
    work, _, job = inputs_4b(args, "shapes-4b")
    if args.smoke:
        return smoke(work, job, args.out)
    if args.attempt > 1:  # no checkpoint at 4B: the retry trains from step 1 on the same volume
        as_a_retry(work)
    command, env = grpo_train_command(["run", "--spec", str(job), "--workdir", str(work), "--no-report"])
    launch(
        Attempt("shapes-4b", args.attempt),
        command,
        {**env, **threads_env(args), "GRPO_ATTEMPT": str(args.attempt)},
        sample_every=args.sample_stacks,
    )
    return 0


def raw_overrides(
    args: argparse.Namespace, model: Path, train: str, val: str, metrics_dir: Path
) -> list[str]:
    """The SafeGRPO model card's main_ppo command at the shapes of sizes_4b, in verl 0.9.1's keys.

    Its keys that verl 0.9.1 no longer reads as written take their working form (docs/verl.md):
    the removed vLLM flag becomes `mm_processor_cache_gb=0`, the logger is console and file (no
    W&B here), and the reward is verl's own geo3k scorer for this data (the card's safety file is
    not published). Attention and padding follow what this machine can run, as ours do.
    """
    s = sizes_4b(args)
    return [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={train}",
        f"data.val_files={val}",
        f"data.train_batch_size={s['batch']}",
        f"data.max_prompt_length={s['prompt']}",
        f"data.max_response_length={s['response']}",
        "data.filter_overlong_prompts=True",
        "data.truncation=error",
        "data.image_key=images",
        "data.image_patch_size=16",
        # The card leaves the sampler's seed to verl (none); ours passes the spec's (42). The same
        # seed gives both runs the same batches, and with them the same padding per micro-batch.
        f"data.seed={DATA_SEED}",
        f"actor_rollout_ref.model.path={model}",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        f"actor_rollout_ref.model.use_remove_padding={ATTENTION['remove_padding']}",
        f"actor_rollout_ref.actor.strategy={s['engine']['strategy']}",
        f"actor_rollout_ref.ref.strategy={s['engine']['strategy']}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={s['mini']}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={s['micro']}",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.01",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        "actor_rollout_ref.actor.entropy_coeff=0",
        "actor_rollout_ref.model.enable_gradient_checkpointing=True",
        f"actor_rollout_ref.actor.fsdp_config.param_offload={s['engine']['paramOffload']}",
        f"actor_rollout_ref.actor.fsdp_config.optimizer_offload={s['engine']['optimizerOffload']}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={s['micro']}",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.name=vllm",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm.mm_processor_cache_gb=0",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={s['gpu_memory']}",
        "actor_rollout_ref.rollout.enable_chunked_prefill=True",
        "actor_rollout_ref.rollout.enforce_eager=False",
        "actor_rollout_ref.rollout.free_cache_engine=True",
        f"actor_rollout_ref.rollout.n={s['group']}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={s['micro']}",
        "actor_rollout_ref.ref.fsdp_config.param_offload=True",
        "algorithm.use_kl_in_reward=False",
        "trainer.critic_warmup=0",
        "trainer.logger=[console,file]",
        "trainer.project_name=verl_grpo",
        "trainer.experiment_name=raw_4b",
        f"trainer.n_gpus_per_node={args.gpus}",
        "trainer.nnodes=1",
        "trainer.save_freq=-1",
        "trainer.test_freq=-1",
        "trainer.val_before_train=False",
        f"trainer.total_training_steps={args.steps}",
        f"trainer.default_local_dir={metrics_dir / 'checkpoints'}",
        *ATTENTION["overrides"],
        *raw_reward(args),
        *threads_override(args),
    ]


def raw_reward(args: argparse.Namespace) -> list[str]:
    """Which reward raw verl scores with. The SafeGRPO card passes its own file through
    `custom_reward_function`; here that is our geo3k file, the one our job's builtin `geo3k` runs, so
    the reward is not one of the differences a comparison measures (the first three leases scored
    raw verl with verl's own, `--raw-reward verl`)."""
    if args.raw_reward == "verl":
        return []
    from grpo_trainer.rewards.registry import get_reward

    geo3k = get_reward("geo3k")
    return [
        f"reward.custom_reward_function.path={geo3k.path}",
        f"reward.custom_reward_function.name={geo3k.function}",
    ]


DATA_SEED = 42
"""`spec.algorithm.seed`'s default, which our engine passes to verl as `data.seed`."""


def start_raw(args: argparse.Namespace) -> int:
    work, model, job = inputs_4b(args, "raw-4b")
    if args.smoke:
        return smoke(work, job, args.out)
    # The same parquet files our job trains on (prepared by the trainer's geo3k preset, untimed).
    if run_now(["prepare-data", "--spec", str(job), "--workdir", str(work)], work / "prepare-data.log"):
        raise SystemExit("prepare-data failed: see prepare-data.log")
    prepared = max(work.rglob("train.parquet"), key=lambda p: p.stat().st_mtime)
    attempt = Attempt("raw-4b", args.attempt)
    overrides = raw_overrides(
        args, model, str(prepared), str(prepared.with_name("test.parquet")), attempt.folder
    )
    command = [sys.executable, "-m", "verl.trainer.main_ppo", *overrides]
    env = {
        "VERL_FILE_LOGGER_PATH": str(attempt.folder / metrics_name(attempt.number)),
        # verl's workers need trl's value-head name, which the carried trl lacks (docs/verl.md): the
        # same shadow package our engine puts first, or main_ppo cannot start its actor at all.
        # Our reward file (--raw-reward ours) imports the trainer's package in verl's reward workers.
        "PYTHONPATH": _pythonpath(
            paths.REPO / "trainer" / "grpo_trainer" / "engines" / "verl" / "shadows",
            paths.REPO / "trainer",
            paths.REPO / "operator",
        ),
    }
    launch(attempt, command, env, sample_every=args.sample_stacks)
    return 0


START = {"tiny": start_tiny, "shapes-4b": start_4b, "raw-4b": start_raw}
assert tuple(START) == PARTS
