"""A stand-in for `python -m verl.trainer.main_ppo` in tests: behaves like verl at its edges.

It reads the Hydra overrides it is given, writes file-logger lines to VERL_FILE_LOGGER_PATH,
saves checkpoints the way verl lays them out (shards' fsdp_config.json, then the tracker), calls
the configured checkpoint callback, and exits. FAKE_VERL_MODE=oom makes it fail like a rank that
ran out of device memory.
"""

import importlib
import json
import os
import sys
from pathlib import Path


def main() -> int:
    args = dict(a.lstrip("+").split("=", 1) for a in sys.argv[1:])
    if os.environ.get("FAKE_VERL_MODE") == "oom":
        print("step 1 started")
        print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", file=sys.stderr)
        return 1
    # verl's file logger reads this in the TaskRunner: it must arrive through runtime_env.
    logger_path = args["ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH"]
    assert logger_path == os.environ["VERL_FILE_LOGGER_PATH"]
    assert "ray_kwargs.ray_init.num_cpus" not in args
    ckpt = Path(args["trainer.default_local_dir"])
    world = int(args["trainer.nnodes"]) * int(args["trainer.n_gpus_per_node"])
    callback = None
    if "trainer.checkpoint_callback_class" in args:
        module, _, name = args["trainer.checkpoint_callback_class"].rpartition(".")
        callback = getattr(importlib.import_module(module), name)(config=None)
    Path(logger_path).parent.mkdir(parents=True, exist_ok=True)
    with open(logger_path, "w") as log:
        for step in (1, 2, 3):
            data = {
                "training/global_step": step,
                "training/epoch": 0,
                "critic/score/mean": 0.2 * step,
                "response_length/mean": 300.0 + step,
                "timing_s/step": 2.0,
            }
            if step == 3:
                data["val-core/hiyouga/geometry3k/acc/mean@1"] = 0.5
            log.write(json.dumps({"step": step, "data": data}) + "\n")
            log.flush()
            if step >= 2:
                actor = ckpt / f"global_step_{step}" / "actor"
                actor.mkdir(parents=True, exist_ok=True)
                (actor / "fsdp_config.json").write_text(json.dumps({"world_size": world}))
                (ckpt / "latest_checkpointed_iteration.txt").write_text(str(step))
                if callback is not None:
                    callback.on_save(trainer=None, global_step=step, checkpoint_dir=str(actor.parent))
    print("training done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
