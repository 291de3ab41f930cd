"""Real verl + vLLM GRPO steps on a GPU machine: our GRPOJob through `grpo-train run`, and verl run directly.

Every attempt is a process of its own, detached from the command that started it: `start`
launches it and returns at once, `wait` follows it (as often as needed) and writes what it did
into --out each time, and an attempt that resumes another is started by a `start` of its own.

    tiny       the offline tiny Qwen3-VL (head_dim 64: vLLM's attention kernels reject smaller heads) on
               geo3k-format synthetic data with images, the geo3k preset and builtin reward, vLLM
               rollouts. Attempt 1 trains steps 1-2 and saves; attempt 2 (a new process, started
               after attempt 1 has ended) resumes from that checkpoint, trains 3-4, saves and exports.
    shapes-4b  the SafeGRPO example's per-GPU load at Qwen3-VL-4B shapes (random weights) on one GPU:
               the step time and its split (verl's per-phase timings), tokens/s per GPU, peak
               memory, the start-up phases. No checkpoint (4B weights and Adam state: ~60 GB).
               Attempt 2 is a retry of the same job on the same volume: its start-up against
               attempt 1's is what a retry saves (compile caches and prepared data kept on the
               job's volume).
    raw-4b     verl's own main_ppo with the SafeGRPO model card's overrides at the same shapes, on
               the same model and data, no grpo-train: the floor our layer is measured against.

Commands, from the repository root (docs/benchmarks/verl-gpu.md says what to carry to the GPU
machine and how to run them there):

    here:   python -m benchmarks.verl_gpu prepare      # the few wheels grpo-train needs beyond the stack
    there:  eval "$(bash benchmarks/gpu_stack.sh env)"  # the carried stack, this checkout's packages
            python -m benchmarks.verl_gpu start tiny [--attempt 2] [--gpus 2]
            python -m benchmarks.verl_gpu start shapes-4b [--attempt 2] [--steps 3]
            python -m benchmarks.verl_gpu start raw-4b [--steps 3] [--then shapes-4b]   # the second once the first ends
            python -m benchmarks.verl_gpu start shapes-4b --steps 1 --then shapes-4b  # a cold attempt, then its retry
            ... start PART --sample-stacks 5      # every Python process's stack every 5 s until step 1 ends
            ... start PART --engine-override KEY=VALUE   # one more engine override in ours' GRPOJob
            python -m benchmarks.verl_gpu wait tiny --out "$OUT" [--seconds 540]
            ... wait shapes-4b --stop-at-startup  # stop each attempt once its rollout server is up
            python -m benchmarks.verl_gpu stop tiny    # the running attempt and its Ray
            python -m benchmarks.verl_gpu jit-check --out "$OUT"   # FlashInfer's kernel builds, timed
    here:   python -m benchmarks.verl_gpu stacks DIR/PART-logs.tar.gz [--attempt N]   # their timeline
            python -m benchmarks.verl_gpu record DIR [--section KEY | --previous-as KEY]
    CPU smoke (everything up to launching verl: model, data, spec, plan, validate, data preparation):
            python -m benchmarks.verl_gpu start tiny --smoke --out /tmp/smoke

`wait` returns when the attempt ends or its time is up, printing the attempt's progress lines;
an attempt started with `--then` is followed by the one its chain starts next, in the same call.
Its summary (`<part>-summary.json`) and the logs (`<part>-logs.tar.gz`) land in --out each time.

Modules: `stack` (what grpo-train needs beyond the carried stack), `inputs` (model, data, GRPOJob),
`parts` (what `start` runs), `attempts` (detached attempts and their supervisor), `monitor` (GPU,
host and stack samples beside each), `phases` (the start-up's marks), `chain` (`--then`),
`summaries` (`wait`), `jit` (FlashInfer's builds), `stacks`, `record` and `cli`.
"""
