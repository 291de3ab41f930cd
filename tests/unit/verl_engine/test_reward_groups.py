"""Routing a GRPO group to one reward worker, and the group sizes stamped on a batch (no verl needed)."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import numpy as np
from grpo_trainer.engines.verl.reward_groups import RewardRouter, expected_size, group_sizes, route, routed


class Handle:
    """A reward worker handle: records what `compute_score.remote` was called with."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.seen: list[str] = []
        self.compute_score = SimpleNamespace(remote=self.remote)

    def remote(self, data: object) -> str:
        self.seen.append(data.non_tensor_batch["uid"][0])
        return self.name


def trajectory(uid: str) -> object:
    return SimpleNamespace(non_tensor_batch={"uid": np.array([uid], dtype=object)})


def test_a_groups_trajectories_all_reach_the_same_worker_and_the_load_is_shared() -> None:
    handles = [Handle(f"w{i}") for i in range(4)]
    (router,) = routed(handles)
    for uid in [f"uid-{i}" for i in range(40)] * 8:  # 40 groups of 8
        router.compute_score.remote(trajectory(uid))
    owners: dict[str, set[str]] = {}
    for handle in handles:
        for uid in handle.seen:
            owners.setdefault(uid, set()).add(handle.name)
    assert all(len(names) == 1 for names in owners.values())
    assert all(len(handle.seen) >= 8 for handle in handles)


def test_routing_does_not_depend_on_the_process() -> None:
    # Python's str hash changes per process; the route must not (every agent loop worker agrees).
    assert [route(f"uid-{i}", 8) for i in range(6)] == [route(f"uid-{i}", 8) for i in range(6)]
    assert route("0d1c7c3e-1f0e-4c4a-9d2b-3f1f8e0b7a11", 8) == 6  # crc32, not hash()


def test_the_router_travels_like_the_handle_list_it_replaces() -> None:
    router = pickle.loads(pickle.dumps(RewardRouter(["a", "b"])))
    assert router.handles == ["a", "b"]
    assert router.compute_score.handles == ["a", "b"]
    assert routed(None) is None
    assert routed([]) == []
    assert routed([router]) == [router]  # not wrapped twice


def test_group_sizes_count_the_rows_of_each_uid() -> None:
    assert group_sizes(["a", "a", "b", "a", "c", "c"]) == [3, 3, 1, 3, 2, 2]
    assert expected_size(None, 5) == 5
    assert expected_size(np.int64(8), 5) == 8
    assert expected_size("garbage", 5) == 5
    assert expected_size(0, 5) == 5
