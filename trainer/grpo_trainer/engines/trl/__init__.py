"""The single-device LoRA engine: TRL's GRPOTrainer with peft, the third seed's recipe by default.

    settings.py     TrlSettings (the seed's recipe) -> GRPOConfig / LoraConfig (pure)
    job.py          a GRPOJob -> TrlSettings, with a reason for every value (pure)
    data.py         the prepared verl-format parquet -> TRL rows
    rewards.py      our rewards as TRL reward functions
    runner.py       load, train with resume, export (the only module with side effects)
    callbacks.py    metrics lines, checkpoint events and pruning during training
    checkpoints.py  checkpoint-N folders across attempts
    metrics.py      the metrics and checkpoint events files the status reporter tails
    export.py       the adapter and the merged model
    engine.py       all of the above behind the Engine protocol (engines/base.py)

Only `settings`, `job`, `metrics` and `checkpoints` import without torch, so the spec mapping
is testable anywhere.
"""
