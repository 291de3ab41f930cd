"""Our agent loop managers on verl 0.9.1's own classes: which one verl gets, and what each adds.

verl 0.9.1's default trainer (`trainer.use_v1=true`) runs its TransferQueue agent loop manager;
`trainer.use_v1=false` and verl 0.7 run the DataProto one. Both must route a group's trajectories
to one reward worker and tell it the group's size. (The DataProto manager's whole path, through
verl's agent loop and reward workers, runs in test_rewards.py; the TransferQueue one needs a
running TransferQueue, so its additions are checked on verl's own class and batch format here.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from support.verl_runtime import example_job, verl_config


@pytest.fixture(scope="module")
def safegrpo_cfg(tiny_model: Path, user_parquet: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("safegrpo")
    return verl_config(
        example_job("safegrpo-nvidia", root), tiny_model, user_parquet, user_parquet, root / "c"
    )[0]


def v1_batch(rows: int, validate: bool, rollout_n: list[int] | None = None) -> Any:
    """A prompt batch as verl 0.9.1's v1 trainer hands it to the agent loop manager."""
    import numpy as np
    from verl.utils import tensordict_utils as tu

    batch_dict: dict[str, Any] = {
        "raw_prompt": [[{"role": "user", "content": f"q{i}"}] for i in range(rows)],
        "uid": np.array([f"u{i}" for i in range(rows)], dtype=object),
    }
    if rollout_n is not None:
        batch_dict["__rollout_n__"] = rollout_n
    batch = tu.get_tensordict(batch_dict)
    tu.assign_non_tensor_data(batch, "global_steps", 3)
    if validate:
        tu.assign_non_tensor_data(batch, "validate", True)
    return batch


def test_verl_gets_the_manager_its_trainer_runs(safegrpo_cfg: Any) -> None:
    from grpo_trainer.engines.verl.grouped_reward import (
        DataProtoAgentLoopManager,
        GroupedAgentLoopManager,
        transfer_queue_manager,
    )
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop import AgentLoopManager
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ
    from verl.utils.import_utils import load_class_from_fqn

    loaded = load_class_from_fqn(safegrpo_cfg.actor_rollout_ref.rollout.agent.agent_loop_manager_class)
    assert loaded is GroupedAgentLoopManager
    assert safegrpo_cfg.trainer.use_v1 is True  # verl 0.9.1's default trainer
    assert issubclass(loaded.manager_class(safegrpo_cfg), AgentLoopManagerTQ)
    assert transfer_queue_manager() is loaded.manager_class(safegrpo_cfg)
    classic = OmegaConf.merge(safegrpo_cfg, {"trainer": {"use_v1": False}})
    assert loaded.manager_class(classic) is DataProtoAgentLoopManager
    assert issubclass(DataProtoAgentLoopManager, AgentLoopManager)


def test_the_transfer_queue_manager_routes_groups_to_one_reward_worker(safegrpo_cfg: Any) -> None:
    from grpo_trainer.engines.verl.grouped_reward import transfer_queue_manager
    from grpo_trainer.engines.verl.reward_groups import RewardRouter, route

    handles = ["worker-0", "worker-1", "worker-2"]
    manager = transfer_queue_manager()(
        config=safegrpo_cfg, llm_client=None, teacher_client=None, reward_loop_worker_handles=handles
    )
    (router,) = manager.reward_loop_worker_handles
    assert isinstance(router, RewardRouter)
    assert router.handles == handles
    assert {route(f"uid-{i}", 3) for i in range(30)} == {0, 1, 2}
    assert route("uid-7", 3) == route("uid-7", 3)
    # verl's own worker class is kept: only the handles it is given change.
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ

    assert manager.agent_loop_workers_class is AgentLoopWorkerTQ


@pytest.mark.parametrize(
    ("validate", "rollout_n", "expected"),
    [(False, None, [8, 8, 8]), (True, None, [1, 1, 1]), (False, [2, 8, 4], [2, 8, 4])],
)
def test_group_sizes_are_what_verls_v1_agent_loop_will_run(
    safegrpo_cfg: Any, validate: bool, rollout_n: list[int] | None, expected: list[int]
) -> None:
    """rollout.n for training, val_kwargs.n for validation, a row's own __rollout_n__ when set."""
    from grpo_trainer.engines.verl.grouped_reward import GROUP_SIZE_KEY, tensordict_group_sizes

    assert safegrpo_cfg.actor_rollout_ref.rollout.n == 8
    assert safegrpo_cfg.actor_rollout_ref.rollout.val_kwargs.n == 1
    batch = v1_batch(3, validate, rollout_n)
    assert tensordict_group_sizes(batch, safegrpo_cfg) == expected
    # The stamp is a per-row tensor: verl's v1 worker hands row i's value to that row's sessions.
    batch[GROUP_SIZE_KEY] = torch.tensor(expected)
    assert [int(batch[GROUP_SIZE_KEY][i]) for i in range(3)] == expected
