"""A verl crash says what it was and where, and the same crash signs the same way in every attempt.

The log is shaped as main_ppo's output was when verl's actor update crashed at Qwen3-VL-4B
shapes on the H200: Ray's actor prefixes and colours, Ray's RayTaskError wrappers around the
worker's traceback, the torch frames below verl's, and the exception at the bottom.
"""

from __future__ import annotations

import json

from grpo_operator.api.contract import UNKNOWN, failure_in
from grpo_trainer.crash_report import root_cause
from grpo_trainer.failures import classify_engine_exit

SITE = "/tmp/gpu-stack/site-packages"


def verl_update_crash(seqlen: int = 1278, pid: int = 3911) -> str:
    worker = f"\x1b[36m(WorkerDict pid={pid})\x1b[0m "
    return "\n".join(
        [
            "(TaskRunnerV1 pid=3053) step:0 - training/global_step:0",
            "Error executing job with overrides: ['algorithm.adv_estimator=grpo', 'data.train_batch_size=16']",
            "Traceback (most recent call last):",
            f'  File "{SITE}/verl/trainer/main_ppo.py", line 42, in main',
            "    run_ppo(config)",
            f'  File "{SITE}/ray/_private/worker.py", line 2822, in get',
            "    raise value.as_instanceof_cause()",
            "ray.exceptions.RayTaskError(RuntimeError): \x1b[36mray::TaskRunnerV1.run()\x1b[39m "
            "(pid=3053, ip=10.0.0.7, actor_id=4f1e, repr=<verl.trainer.main_ppo.TaskRunnerV1 object>)",
            f'  File "{SITE}/verl/trainer/ppo/ray_trainer.py", line 1373, in _update_actor',
            "    actor_output = self.actor_rollout_wg.update_actor(batch_td)",
            "ray.exceptions.RayTaskError(RuntimeError): ray::WorkerDict.actor_rollout_update_actor() "
            f"(pid={pid}, ip=10.0.0.7, actor_id=9a2c)",
            f'{worker}  File "{SITE}/verl/workers/engine_workers.py", line 289, in train_mini_batch',
            f"{worker}    for batch_idx, mini_batch_td in enumerate(dataloader):",
            f'{worker}  File "{SITE}/verl/utils/tensordict_utils.py", line 495, in index_select_tensor_dict',
            f"{worker}    tensor_lst = tensor.unbind()  # for performance",
            f'{worker}  File "{SITE}/torch/nested/_internal/ops.py", line 1173, in unbind_int',
            f"{worker}    return torch.split(values, lengths_scalars, dim=(ragged_idx - 1))",
            f"RuntimeError: split_with_sizes expects split_sizes to sum exactly to {seqlen} (input tensor's "
            "size at dimension 1), but got split_sizes=[4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4]",
            "",
            "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.",
        ]
    )


def test_the_root_cause_is_the_workers_exception_where_verl_raised_it() -> None:
    cause = root_cause(verl_update_crash())
    assert cause is not None
    assert cause.exception == "RuntimeError"
    assert cause.message.startswith("split_with_sizes expects split_sizes to sum exactly to 1278")
    assert cause.function == "index_select_tensor_dict"
    assert cause.location == "verl/utils/tensordict_utils.py:495"
    assert cause.task == "WorkerDict.actor_rollout_update_actor"
    assert cause.describe().startswith("RuntimeError: split_with_sizes expects")
    assert cause.describe().endswith(
        "in index_select_tensor_dict (verl/utils/tensordict_utils.py:495) "
        "in Ray task WorkerDict.actor_rollout_update_actor"
    )


def test_the_same_crash_signs_alike_whatever_its_sizes_and_another_does_not() -> None:
    first, again = root_cause(verl_update_crash(1278, 3911)), root_cause(verl_update_crash(1301, 4120))
    assert first is not None
    assert again is not None
    assert first.signature() == again.signature()
    other = root_cause(
        verl_update_crash().replace("RuntimeError: split_with_sizes", "ValueError: split_with_sizes")
    )
    assert other is not None
    assert other.signature() != first.signature()


def test_the_failure_line_carries_cause_and_signature() -> None:
    failure = classify_engine_exit(1, verl_update_crash())
    assert (failure.code, failure.reason) == (UNKNOWN, "EngineCrashed")
    assert failure.message.startswith(
        "RuntimeError: split_with_sizes expects split_sizes to sum exactly to 1278"
    )
    assert (
        "in Ray task WorkerDict.actor_rollout_update_actor; the engine exited with code 1" in failure.message
    )
    told = failure_in(
        f"Job entrypoint command failed with exit code 1, last available logs:\n{failure.line()}"
    )
    assert told is not None
    assert told["signature"] == failure.signature
    assert len(failure.signature) == 12
    assert len(json.dumps(told["message"])) <= 520


def test_a_crash_without_an_exception_says_only_its_exit_code() -> None:
    failure = classify_engine_exit(1, "step:3 - x\nSegmentation fault (core dumped)\n")
    assert failure.message == "the engine exited with code 1"
    assert failure.signature == ""
    assert "signature" not in json.loads(failure.line().partition(" ")[2])


def test_warnings_after_the_crash_are_not_its_cause() -> None:
    log = verl_update_crash() + "\n(pid=1) UserWarning: Disabled critic as algorithm.adv_estimator != gae.\n"
    cause = root_cause(log)
    assert cause is not None
    assert cause.exception == "RuntimeError"
