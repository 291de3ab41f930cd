"""Run in every Ray worker of a verl job before it works: fixes for verl bugs our jobs hit.

main_ppo passes `setup` to `ray.init` as the job's `runtime_env.worker_process_setup_hook`
(overrides.py), so the TaskRunner, the actor, reference and rollout workers all run it first. It
imports nothing heavy: each fix waits for the verl module it corrects to be imported, then patches
it, so the hook costs a reward worker nothing.

The fixes: first, Qwen3-VL's 4-row (mRoPE) position ids in verl's no-padding batches.
`verl.workers.utils.padding.left_right_2_no_padding` makes them a jagged nested tensor with
`torch.nested.as_nested_tensor` over per-sample `(4, L_i)` tensors. When every sequence of the
batch has the same length (a model that writes every response to the limit, with prompts of one
length: a random-weight model, or a thinking model early in training, at the reference recipes'
shapes), torch finds no ragged dimension among the lengths and makes the 4 rows the ragged one:
values `(B*4, L)`, offsets `[0, 4, 8, ...]`. verl's `maybe_fix_3d_position_ids`, which every
worker calls on what it receives, then sets `_ragged_idx = 2` unconditionally (right after a
pickle round trip of a well-formed tensor, wrong here), and the next `unbind()` — the mini-batch
split in `update_actor` — fails with "split_with_sizes expects split_sizes to sum exactly to L
... but got split_sizes=[4, 4, ...]". Batches of mixed lengths never show it, which is why tiny
models with short, varied answers train and the 4B shapes crashed at their first update.

`normalize_position_ids` replaces verl's fix with one that reads the layout before it changes it,
and rebuilds the 4-rows-ragged form as the canonical one (values `(4, sum L_i)`, ragged index 2)
with verl's own `nested_tensor_from_tensor_list`; the no-padding conversion's output is put in
that form too, so the first split on the TaskRunner is right as well.

And the over-long prompt filter's cache. verl's `RLHFDataset` filters with `datasets`, which keeps
the result under `HF_HOME` (on the job's volume) keyed by a hash of the filter function, and that
function holds the dataset itself: its `config`, which verl's trainer passes as `config.data`, a
node of the whole job configuration, and its list of files, `config.data.train_files`, another
node of it; each pickles with its parent. So every attempt's own values anywhere in the
configuration (the attempt number and metrics file in the runtime_env, a resume path) made a new
key, and every retry ran the filter again (on the H200 it did, with the section detached and the
list not: the list was the whole configuration again). `_own_data_config` hands the dataset its
`data` section and its files each alone, resolved, so the key is what the filter reads: the data
settings, the tokenizer, the processor and the files.

And the filter's threads. `datasets` forks the filter's worker processes from the TaskRunner, and
each one keeps the TaskRunner's torch thread count, the pod's threads: W workers with W threads
each ran W x W threads on W cores. On the H200's 16 cores the geo3k recipe's 2,101 rows took 77 s
that way against 4.5 s with one thread per worker (benchmarks/prompt_filter.py; 160 s inside a
whole start, where the filter was a third of a cold attempt's start-up). `threads_shared_by`
gives each worker its share of the threads for the filter's duration, and puts the TaskRunner's
back afterwards.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any

from grpo_operator.api.contract import Env

_TENSORDICT_UTILS = "verl.utils.tensordict_utils"
_PADDING = "verl.workers.utils.padding"
_RL_DATASET = "verl.utils.dataset.rl_dataset"
_PATCHED = "_grpo_patched"


def normalize_position_ids(data: Any) -> None:
    """Put 3-D nested `position_ids` of a verl TensorDict in the canonical ragged-on-length form.

    Three layouts reach a worker: the canonical one (values `(C, sum L)`, ragged index 2); the
    canonical one after a pickle round trip, which forgets the ragged index (torch reports 1); and
    the rows-ragged one an equal-length batch gets from `as_nested_tensor` (values `(B*C, L)`,
    every offset step C). Each is recognised from its values' shape and its offsets; the last is
    rebuilt, the second gets its index back, the first is left alone.
    """
    if "position_ids" not in data:  # a TensorDict: its keys
        return
    nested = data["position_ids"]
    if not getattr(nested, "is_nested", False) or nested.dim() != 3:
        return
    values, offsets = nested.values(), nested.offsets()
    total = int(offsets[-1])
    if values.dim() == 2 and values.shape[1] == total and getattr(nested, "_ragged_idx", 1) == 2:
        return  # canonical
    steps = offsets.diff()
    batch = steps.numel()
    rows_ragged = (
        values.dim() == 2
        and values.shape[0] == total
        and batch > 0
        and bool((steps == steps[0]).all())
        and values.shape[0] == batch * int(steps[0])
    )
    if rows_ragged and not (values.shape[1] == total and int(steps[0]) == values.shape[0]):
        rows = int(steps[0])
        samples = list(values.reshape(batch, rows, values.shape[1]).unbind(0))
        data["position_ids"] = _tensor_from_list(samples)
        return
    if values.dim() == 2 and values.shape[1] == total:
        nested._ragged_idx = 2  # canonical, its index lost in a pickle round trip


def _tensor_from_list(samples: Sequence[Any]) -> Any:
    from verl.utils.tensordict_utils import nested_tensor_from_tensor_list

    return nested_tensor_from_tensor_list(list(samples), ragged_idx=2)


def _normalizing_no_padding(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def left_right_2_no_padding(data: Any) -> Any:
        out = original(data)
        normalize_position_ids(out)
        return out

    left_right_2_no_padding.__doc__ = original.__doc__
    setattr(left_right_2_no_padding, _PATCHED, True)
    return left_right_2_no_padding


_FIX_3D_POSITION_IDS = "maybe_fix_3d_position_ids"
_NO_PADDING = "left_right_2_no_padding"


def _patch_tensordict_utils(module: ModuleType) -> None:
    if hasattr(module, _FIX_3D_POSITION_IDS):
        setattr(module, _FIX_3D_POSITION_IDS, normalize_position_ids)


def _patch_padding(module: ModuleType) -> None:
    original = getattr(module, _NO_PADDING, None)
    if original is not None and not getattr(original, _PATCHED, False):
        setattr(module, _NO_PADDING, _normalizing_no_padding(original))


def detached(node: Any) -> Any:
    """An OmegaConf node (a section, a list) as one of its own: resolved, no parent, so that it
    pickles alone. Anything else as is."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(node, DictConfig | ListConfig) and node._get_parent() is not None:
        return OmegaConf.create(OmegaConf.to_container(node, resolve=True))
    return node


def _own_data_config(original: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(original)
    def init(self: Any, data_files: Any, tokenizer: Any, config: Any, *args: Any, **kwargs: Any) -> None:
        original(self, detached(data_files), tokenizer, detached(config), *args, **kwargs)

    setattr(init, _PATCHED, True)
    return init


@contextlib.contextmanager
def threads_shared_by(workers: int) -> Iterator[None]:
    """While it lasts, processes forked from this one run `workers` at a time on this one's threads.

    A forked worker keeps this process's torch thread count, so the share goes there (this process
    only waits meanwhile); a worker started afresh reads `OMP_NUM_THREADS`, so it goes there too.
    """
    import torch

    total = torch.get_num_threads()
    share = max(1, total // max(1, workers))
    if share == total:
        yield
        return
    previous = os.environ.get(Env.THREADS)
    os.environ[Env.THREADS] = str(share)
    torch.set_num_threads(share)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(Env.THREADS, None)
        else:
            os.environ[Env.THREADS] = previous
        torch.set_num_threads(total)


def _filter_in_shared_threads(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def maybe_filter_out_long_prompts(self: Any, *args: Any, **kwargs: Any) -> Any:
        filtering = getattr(self, "filter_overlong_prompts", False)
        with threads_shared_by(int(getattr(self, "num_workers", 1) or 1) if filtering else 1):
            return original(self, *args, **kwargs)

    setattr(maybe_filter_out_long_prompts, _PATCHED, True)
    return maybe_filter_out_long_prompts


def _patch_rl_dataset(module: ModuleType) -> None:
    dataset = getattr(module, "RLHFDataset", None)
    if dataset is None:
        return
    if not getattr(dataset.__init__, _PATCHED, False):
        dataset.__init__ = _own_data_config(dataset.__init__)
    filter_prompts = getattr(dataset, "maybe_filter_out_long_prompts", None)
    if filter_prompts is not None and not getattr(filter_prompts, _PATCHED, False):
        dataset.maybe_filter_out_long_prompts = _filter_in_shared_threads(filter_prompts)


PATCHES: dict[str, Callable[[ModuleType], None]] = {
    _TENSORDICT_UTILS: _patch_tensordict_utils,
    _PADDING: _patch_padding,
    _RL_DATASET: _patch_rl_dataset,
}
"""verl module -> what to change in it, right after it is imported (before anyone imports names
from it: verl's workers bind these functions with `from ... import` at their own import)."""


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the real loader of a patched module to patch it once loaded."""

    def find_spec(
        self, fullname: str, path: Any, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        patch = PATCHES.get(fullname)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader, patch)
                return spec
        return None


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, patch: Callable[[ModuleType], None]) -> None:
        self.loader, self.patch = loader, patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        self.patch(module)


def setup() -> None:
    """The worker process setup hook: patch what is imported already, and the rest on import."""
    for name, patch in PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    if not any(isinstance(finder, _PatchOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())


HOOK = f"{__name__}.setup"
"""What `runtime_env.worker_process_setup_hook` names (Ray imports it in each worker)."""
