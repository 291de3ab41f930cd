#!/usr/bin/env bash
# Every GPU check of the TRL engine, for one device call each (<= 9 minutes): `generation` (the
# rollout paths side by side at the single-GPU LoRA recipe's shapes), `memory` (Qwen3-VL-4B shapes, recipe settings,
# adamw_torch vs adamw_8bit), `learning` (colour task, vision LoRA vs the frozen-vision control) and
# `resume` (crash + resume in a second process). Results go to the folder named first.
#   eval "$(bash benchmarks/gpu_stack.sh env)"      # the carried stack: vLLM, TRL, bitsandbytes, ...
#   bash benchmarks/trl_gpu_suite.sh OUTDIR generation
#   bash benchmarks/trl_gpu_suite.sh OUTDIR learning resume
#   bash benchmarks/trl_gpu_suite.sh OUTDIR memory
set -u
out=$1
shift
work=/tmp/trl-gpu-work
mkdir -p "$out" "$work"
# Run from the repository root: the benchmarks are the package `benchmarks` there.
export PYTHONPATH="$PWD/trainer:$PWD/operator${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1
export VLLM_USE_FLASHINFER_SAMPLER=${VLLM_USE_FLASHINFER_SAMPLER:-0}
summary="$out/summary.txt"
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch, transformers, trl, peft, accelerate, datasets
print("torch", torch.__version__, "transformers", transformers.__version__, "trl", trl.__version__,
      "peft", peft.__version__, "accelerate", accelerate.__version__, "datasets", datasets.__version__)'
  python3 -c 'import vllm; print("vllm", vllm.__version__)' 2>/dev/null || echo "vllm: not importable"
  python3 -c 'import bitsandbytes; print("bitsandbytes", bitsandbytes.__version__)' 2>/dev/null \
    || echo "bitsandbytes: not importable"
} >> "$summary" 2>&1

for part in "$@"; do
  start=$(date +%s)
  case "$part" in
    generation)
      # Its own budget (510 s) skips what would not finish; the timeout is the backstop.
      timeout 560 python3 -m benchmarks.trl_generation --out "$work/generation" > "$work/generation.log" 2>&1
      rc=$?; cp "$work/generation/generation.json" "$work/generation/generation.png" "$out/" 2>/dev/null ;;
    memory)
      # 1024 + 1024 tokens; two optimisers x 2 steps, rollouts compiled so both fit one call.
      timeout 540 python3 -m benchmarks.trl_memory_4b --out "$work/memory" --steps 2 --generation compiled \
        > "$work/memory.log" 2>&1
      rc=$?; cp "$work/memory/memory-4b.json" "$work"/memory/memory-steps-*.jsonl "$out/" 2>/dev/null ;;
    learning)
      timeout 360 python3 -m benchmarks.trl_learning --out "$work/learning" > "$work/learning.log" 2>&1
      rc=$?; cp "$work/learning/learning.json" "$work/learning/learning.png" "$out/" 2>/dev/null ;;
    resume)
      timeout 100 python3 -m grpo_trainer.testing.resume "$work/resume" first bf16 > "$work/resume.log" 2>&1
      first=$?
      timeout 100 python3 -m grpo_trainer.testing.resume "$work/resume" second bf16 >> "$work/resume.log" 2>&1
      rc="first=$first second=$?"; cp "$work/resume/resume-check.json" "$out/" 2>/dev/null ;;
    *) rc="unknown part" ;;
  esac
  echo "$part: rc=$rc seconds=$(( $(date +%s) - start ))" >> "$summary"
done
# Logs and per-step metrics in one archive (the device tool returns at most 8 files); the metrics
# files' names are the trainer's.
read -r metrics events < <(python3 -c 'from grpo_operator.api.contract import checkpoint_events_file
from grpo_trainer.engines.trl.metrics import LOCAL_METRICS_FILE as name
print(name, checkpoint_events_file(name))')
tar -czf "$out/logs-$(echo "$@" | tr ' ' '-').tar.gz" -C "$work" \
  $(cd "$work" && ls -d *.log */"$metrics" */*/"$metrics" */"$events" */*/"$events" 2>/dev/null)
cat "$summary"
