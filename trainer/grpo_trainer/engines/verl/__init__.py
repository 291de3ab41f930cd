"""The verl engine: GRPO with vLLM rollouts on a Ray cluster, for one or many nodes.

One attempt, in an order where every step is safe to repeat: checkpoints are checked first (a
resume that cannot work fails in seconds, not after the model is loaded), data and model are
prepared into caches on the shared volume, the overrides are composed against the installed
verl's own configuration before anything heavy starts, and `verl.trainer.main_ppo` then runs
attached to the Ray cluster of the Ray job.

    versions.py    what differs between the verl releases the images carry
    overrides.py   spec -> Hydra overrides, each with its reason (pure)
    compose.py     compose verl's own config with them and check the values
    configs.py     verl's config files, installed or fetched
    launch.py      the main_ppo command, its environment, running it
    callback.py    verl's checkpoint hook -> events for the status reporter
    checkpoints.py resume, world-size check, pruning across attempts
    export.py      the final checkpoint -> a Hugging Face model
    engine.py      all of the above behind the Engine protocol (engines/base.py)

The package itself imports nothing, so verl's driver can load the checkpoint hook cheaply.
"""
