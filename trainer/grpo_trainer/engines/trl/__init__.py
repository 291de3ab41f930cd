"""The single-device LoRA engine: TRL's GRPOTrainer with peft, the single-GPU LoRA recipe by default.

    settings.py     TrlSettings (the single-GPU LoRA recipe) -> GRPOConfig / LoraConfig (pure)
    job.py          a GRPOJob -> TrlSettings, with a reason for every value (pure)
    data.py         the prepared verl-format parquet -> TRL rows
    rewards.py      our rewards as TRL reward functions
    runner.py       load the policy, build GRPOTrainer, train with resume, export (torch and TRL)
    callbacks.py    metrics lines, checkpoint events and pruning during training
    checkpoints.py  checkpoint-N folders across attempts
    metrics.py      the metrics and checkpoint events files the status reporter tails
    generation.py   how rollouts are generated: eager, compiled (static cache + CUDA graphs), vllm
    export.py       the adapter, the merged model, its GGUF files and the sample, in that order
    gguf.py         the merged model -> GGUF language model + mmproj (llama.cpp's converter, quantize)
    gguf_tools.py   llama.cpp's tools from the pinned llama-cpp-python sdist: found, or built
    sample.py       the post-training check: one held-out generation, scored, recorded
    engine.py       all of the above behind the Engine protocol (engines/base.py)

Only `settings`, `job`, `generation`, `gguf*`, `metrics` and `checkpoints` import without torch,
so the spec mapping is testable anywhere.
"""
