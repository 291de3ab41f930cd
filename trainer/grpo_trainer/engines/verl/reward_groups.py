"""GRPO groups across verl's reward workers: which worker scores a trajectory, how big its group is.

verl 0.9 scores each trajectory the moment it finishes: the agent loop sends it to a reward worker
picked at random (`random.choice(reward_loop_worker_handles)`), so the responses to one prompt
land on different workers and no reward manager ever sees them together. To give a batch reward
its group, two things are needed, both here and free of verl imports:

- `RewardRouter` replaces that list with a single entry that sends every trajectory to the worker
  its `uid` (the prompt's id, shared by the group) hashes to: the whole group meets in one worker,
  and the workers still share the load.
- `group_sizes` / `tensordict_group_sizes` say how many responses each prompt will get, written
  into the batch (`GROUP_SIZE_KEY`) before the agent loop fans it out; every trajectory carries its
  row's fields to the reward manager, which then knows when its group is complete, training
  (`rollout.n`) and validation (`val_kwargs.n`, and verl's padding copies) alike.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

GROUP_SIZE_KEY = "grpo_group_size"
"""The per-row field that carries the size of the row's GRPO group to the reward manager."""


def route(uid: Any, workers: int) -> int:
    """The reward worker of a group: the same for every process (no Python hash randomisation)."""
    return zlib.crc32(str(uid).encode("utf-8", "replace")) % max(1, workers)


class _Route:
    """`handle.compute_score.remote(data)`, as verl's agent loop calls it, to the group's worker."""

    def __init__(self, handles: list[Any]) -> None:
        self.handles = handles

    def remote(self, data: Any, *args: Any, **kwargs: Any) -> Any:
        uid = first(data.non_tensor_batch.get("uid")) if data.non_tensor_batch else None
        handle = self.handles[route(uid, len(self.handles))]
        return handle.compute_score.remote(data, *args, **kwargs)


class RewardRouter:
    """Stands in for verl's reward worker list: one entry, routing each trajectory by its uid.

    Picklable with the Ray actor handles inside, so it travels to the agent loop workers as the
    list it replaces does.
    """

    def __init__(self, handles: Sequence[Any]) -> None:
        self.handles = list(handles)
        self.compute_score = _Route(self.handles)


def routed(handles: Sequence[Any] | None) -> list[Any] | None:
    """verl's reward worker list with the router in its place (None stays None: no streamed rewards)."""
    if not handles:
        return None if handles is None else list(handles)
    if len(handles) == 1 and isinstance(handles[0], RewardRouter):
        return list(handles)
    return [RewardRouter(handles)]


def first(values: Any) -> Any:
    """The first element of a per-row column (numpy array, list, tensor), or None."""
    if values is None:
        return None
    try:
        return values[0]
    except (IndexError, KeyError, TypeError):
        return None


def group_sizes(uids: Sequence[Any]) -> list[int]:
    """For each row, how many rows share its uid (verl repeats a prompt's row `n` times, same uid)."""
    counts = Counter(str(uid) for uid in uids)
    return [counts[str(uid)] for uid in uids]


def expected_size(value: Any, default: int) -> int:
    """A row's stamped group size, or `default` when the row carries none (or a broken one)."""
    if value is None:
        return default
    try:
        size = int(value.item() if hasattr(value, "item") else value)
    except (TypeError, ValueError, OverflowError):
        return default
    return size if size >= 1 else default
