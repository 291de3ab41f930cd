"""verl's update step on Qwen3-VL batches whose sequences all have one length, in verl's own code.

At Qwen3-VL-4B shapes with a model that writes every response to the limit (16 prompts of one
length, group 5, 1,024-token responses: 80 sequences of 1,278 tokens), verl 0.9.1 crashed at the
first actor update on the H200: "split_with_sizes expects split_sizes to sum exactly to 1278 ...
but got split_sizes=[4, 4, ...] (80 entries)". The cause, and the fix the engine installs in
every Ray worker, are in grpo_trainer/engines/verl/worker_setup.py.

Each case runs, in a fresh process, what verl does with a rollout batch between the agent loop
and the actor's micro-batches: the agent loop's padded batch (left-padded prompts, right-padded
responses, 4-row position ids), `DataProto.to_tensordict`, `left_right_2_no_padding` on the
TaskRunner, the pickle round trip to the actor worker, `maybe_fix_3d_position_ids` and
`make_iterator`'s mini-batches (`index_select_tensor_dict`), then the micro-batch split
(`chunk_tensordict`), and checks every sample's position ids against the padded batch's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from grpo_trainer.engines.verl.overrides import WORKER_SETUP_HOOK

REPO = Path(__file__).resolve().parents[3]

UPDATE_PATH = r"""
import json, pickle, sys
import torch
fixed, cases = sys.argv[1], json.loads(sys.argv[2])
if fixed == "fixed":
    from grpo_trainer.engines.verl import worker_setup
    worker_setup.setup()  # what Ray runs first in every worker (runtime_env.worker_process_setup_hook)
from verl import DataProto
from verl.utils import tensordict_utils as tu
from verl.workers.utils.padding import left_right_2_no_padding


def update(P, R, prompts, G, mini, micro, lengths):
    B = prompts * G
    gen = torch.Generator().manual_seed(0)
    if lengths == "equal":  # a random model writes to the limit; prompts of one length
        prompt_lens = torch.full((B,), P)
        response_lens = torch.full((B,), R)
    else:
        prompt_lens = torch.randint(P // 2, P + 1, (B,), generator=gen)
        response_lens = torch.randint(1, R + 1, (B,), generator=gen)
    prompt_mask = (torch.arange(P) >= P - prompt_lens[:, None]).long()  # left padding
    response_mask = (torch.arange(R) < response_lens[:, None]).long()  # right padding
    attention_mask = torch.cat([prompt_mask, response_mask], dim=1)
    input_ids = torch.randint(10, 1000, (B, P + R), generator=gen) * attention_mask
    text = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    # Qwen3-VL's rows in verl: text positions, then the temporal, height and width rows of mRoPE.
    position_ids = torch.stack([text, text // 2, text + 7, text * 3], dim=1)
    batch = DataProto.from_dict(
        tensors={
            "prompts": input_ids[:, :P],
            "responses": input_ids[:, P:],
            "response_mask": response_mask,
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
        }
    )
    td = left_right_2_no_padding(batch.to_tensordict())  # ray_trainer._update_actor, on the TaskRunner
    td = pickle.loads(pickle.dumps(td))  # Ray ships it to the actor worker
    tu.maybe_fix_3d_position_ids(td)  # engine_workers.train_mini_batch
    expected = [position_ids[i][:, attention_mask[i].bool()] for i in range(B)]
    seen = 0
    for mini_batch in tu.make_iterator(td, mini_batch_size=mini * G, epochs=1, seed=42):
        tu.maybe_fix_3d_position_ids(mini_batch)
        for chunk in tu.chunk_tensordict(mini_batch, chunks=mini * G // micro):
            for sample in chunk["position_ids"].unbind():
                assert torch.equal(sample, expected[seen]), f"sample {seen}: position ids changed"
                seen += 1
    return seen


results = []
for case in cases:
    try:
        results.append({"samples": update(*case)})
    except Exception as error:  # one line per case: what verl raised
        results.append({"error": f"{type(error).__name__}: {error}"})
print(json.dumps(results))
"""


# prompt length, response length, prompts, group, mini-batch (prompts), micro-batch (sequences)
SHAPES_4B = [254, 1024, 16, 5, 8, 4]
"""The crashed run: 80 sequences of 254 + 1,024 tokens, mini-batch 8 prompts, micro-batch 4."""
ONE_SEQUENCE = [16, 8, 1, 1, 1, 1]
"""A single sequence has no ragged length either (verl's own bug report names it)."""
CASES = {
    "4B shapes, one length": [*SHAPES_4B, "equal"],
    "4B shapes, mixed lengths": [*SHAPES_4B, "mixed"],
    "one sequence": [*ONE_SEQUENCE, "equal"],
}


def _update(fixed: bool) -> dict[str, dict[str, object]]:
    """Every case in one fresh process: verl as released, or with the engine's worker setup."""
    base = os.pathsep.join([str(REPO / "trainer"), str(REPO / "operator")])
    env = {**os.environ, "PYTHONPATH": base}
    args = ["fixed" if fixed else "as-released", json.dumps(list(CASES.values()))]
    done = subprocess.run(
        [sys.executable, "-c", UPDATE_PATH, *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(zip(CASES, json.loads(done.stdout.strip().splitlines()[-1]), strict=True))


def test_as_released_verl_crashes_when_every_sequence_has_one_length(verl_release: str) -> None:
    results = _update(fixed=False)
    for case in ("4B shapes, one length", "one sequence"):
        assert results[case]["error"].startswith("RuntimeError"), (case, results[case])
    assert results["4B shapes, mixed lengths"] == {"samples": 80}


def test_with_the_worker_setup_every_sample_keeps_its_position_ids(verl_release: str) -> None:
    assert _update(fixed=True) == {
        "4B shapes, one length": {"samples": 80},
        "4B shapes, mixed lengths": {"samples": 80},
        "one sequence": {"samples": 1},
    }


def test_ray_runs_the_fix_first_in_every_worker() -> None:
    module, _, function = WORKER_SETUP_HOOK.rpartition(".")
    imported = __import__(module, fromlist=[function])
    assert callable(getattr(imported, function))
