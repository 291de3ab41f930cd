"""The verbs of `python -m benchmarks.verl_gpu`, in one parser, and where each goes."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from benchmarks import verl_gpu

from .attempts import PARTS, Attempt, stop, supervise
from .chain import run_then, start_then, then_argv
from .jit import cmd_jit_check
from .machine import log, log_machine_age
from .parts import DATA_ROWS_PER_GPU, START
from .record import record
from .stack import preflight, prepare
from .stacks import cmd_stacks
from .summaries import cmd_wait


def parser() -> argparse.ArgumentParser:
    """Every verb's options, in one parser (a test reads its defaults)."""
    out = argparse.ArgumentParser(
        prog="python -m benchmarks.verl_gpu",
        description=verl_gpu.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    out.add_argument(
        "verb",
        choices=["prepare", "start", "wait", "stop", "record", "stacks", "jit-check", "_supervise", "_then"],
    )
    out.add_argument(
        "part", nargs="?", help=f"one of {', '.join(PARTS)} (for _supervise: the attempt's folder)"
    )
    out.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/verl-gpu-out")))
    out.add_argument("--attempt", type=int, default=1)
    out.add_argument("--gpus", type=int, default=1)
    out.add_argument("--steps", type=int, default=3, help="steps of a 4B run")
    out.add_argument(
        "--response-length", type=int, default=1024, help="4B runs (a random model writes to it)"
    )
    out.add_argument("--image-side", type=int, default=896, help="4B runs: pixels per side of each image")
    out.add_argument(
        "--prompts",
        choices=["equal", "varied"],
        default="varied",
        help="4B runs: every prompt one length (with full-length responses, every sequence one length), or varied",
    )
    out.add_argument(
        "--train-rows",
        type=int,
        default=0,
        help=f"4B runs: training rows of the generated geo3k data (default {DATA_ROWS_PER_GPU} per GPU; "
        "the geo3k recipe has 2,101)",
    )
    out.add_argument(
        "--omp-threads",
        type=int,
        default=0,
        help="4B runs: OMP_NUM_THREADS for every Ray worker (raw verl: Ray's 1 without it; ours: "
        "each GPU's share of the CPUs without it)",
    )
    out.add_argument("--section", help="record: put ours and raw verl under this key of the existing summary")
    out.add_argument("--previous-as", help="record: keep the main run the new one replaces under this key")
    out.add_argument(
        "--engine-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="tiny and 4B runs of ours: one more of the GRPOJob's engine overrides (repeatable; a --then "
        "chain hands it on), e.g. +actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend=uni",
    )
    out.add_argument(
        "--strategy",
        choices=("fsdp2", "fsdp"),
        default="fsdp2",
        help="tiny and 4B runs, ours and raw verl: verl's FSDP (default fsdp2, which every step "
        "measurement ran; the examples run fsdp, verl's default; a --then chain hands it on)",
    )
    out.add_argument(
        "--actor-offload",
        action="store_true",
        help="4B runs, ours and raw verl: the actor's parameters and optimiser state offloaded to host "
        "memory between phases, as the geo3k recipe runs (a step fits an H100's 80 GB; a --then chain "
        "hands it on)",
    )
    out.add_argument("--seconds", type=float, default=540, help="wait: how long to follow")
    out.add_argument(
        "--stop-at-startup",
        action="store_true",
        help="wait: stop each attempt it follows once its start-up is over (the rollout server up, the "
        "compile caches written), so a start-up pair fits a lease with little device time left",
    )
    out.add_argument(
        "--sample-stacks",
        type=float,
        default=0,
        metavar="S",
        help="start: every S seconds until the first step ends, every Python process's stack (py-spy)",
    )
    out.add_argument("--smoke", action="store_true", help="start: stop before launching verl (CPU)")
    out.add_argument(
        "--then",
        choices=PARTS,
        help="start: start this part too (same options), from a detached process, once the first has ended; "
        "the part being started: its next attempt (a retry)",
    )
    out.add_argument(
        "--raw-reward",
        choices=["ours", "verl"],
        default="ours",
        help="raw-4b: our geo3k reward file through verl's custom_reward_function, as ours runs it, or verl's own scorer",
    )
    out.add_argument("--keep", action="store_true", help="start tiny: reuse the work folder (model, data)")
    out.add_argument(
        "--reward",
        choices=["geo3k", "custom-batch"],
        default="geo3k",
        help="tiny: the builtin geo3k, or a user batch reward that logs each call's size",
    )
    return out


def main(argv: list[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    options = parser()
    args = options.parse_args(given)
    if args.verb == "prepare":
        return prepare()
    if args.verb == "record":  # here, with the folder a device call's files came back to
        return record(Path(args.part), args.gpus, args.section, args.previous_as)
    if args.verb == "stacks":  # here, with a logs archive a `wait` call brought back
        return cmd_stacks(Path(args.part), args.attempt)
    if args.verb == "jit-check":  # there: FlashInfer's sampling kernels, built and loaded, timed
        args.out.mkdir(parents=True, exist_ok=True)
        return cmd_jit_check(args)
    if args.verb == "_supervise":
        return supervise(Path(args.part))
    if args.verb == "_then":
        return run_then(Path(args.part))
    if args.part not in PARTS:
        options.error(f"name a part: {', '.join(PARTS)}")
    if args.verb == "stop":
        return stop(args.part)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.verb == "wait":
        return cmd_wait(args)
    log(f"start {args.part} attempt {args.attempt}: {args.gpus} GPU(s)")
    if not args.smoke and preflight(args.out, sampler=bool(args.sample_stacks)):
        return 3
    code = START[args.part](args)
    if code == 0 and args.then and not args.smoke:
        start_then(Attempt(args.part, args.attempt), then_argv(given, args.part, args.then, args.attempt))
    if not args.smoke:
        log_machine_age()
    return code
