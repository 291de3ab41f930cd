"""Batch arithmetic: how a step's prompts and responses split over devices, and when they cannot.

One function serves the operator's validation (before a cluster is paid for), the verl engine's
check of its composed configuration (where a user's raw override may have changed a size) and the
TRL engine's mapping onto TRL's batch settings, so the three can never disagree and a user reads
the same sentence wherever a rule fires.

Sizes keep verl's meaning for both engines: `trainBatchSize` prompts are rolled out per step,
each `groupSize` times; `miniBatchSize` prompts make one optimiser update; each device runs
`microBatchSizePerDevice` responses per forward pass (or as many as fit `tokensPerDevice`).
Standard library only, like the contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .problem import Problem

DEFAULT_MICRO_BATCH = {"verl": 2, "trl": None}
"""Responses per forward pass when the spec does not say; None: one device's whole share at once."""


@dataclass(frozen=True)
class Batch:
    """The sizes the rules read, from a spec or from a composed engine configuration."""

    devices_per_node: int
    nodes: int
    group_size: int
    train_batch_size: int
    mini_batch_size: int
    micro_batch_size_per_device: int | None
    tokens_per_device: int | None = None
    tensor_parallel_size: int = 1
    longest_sequence: int | None = None
    """Prompt + response tokens at most (for the token budget rule)."""

    @classmethod
    def from_spec(cls, spec: Any, engine: str | None = None) -> Batch:
        """The sizes of a GRPOJobSpec, with the engine's default micro-batch when none is given."""
        algo, res = spec.algorithm, spec.resources
        engine = engine or spec.engine.name
        micro = algo.micro_batch_size_per_device
        if micro is None and algo.tokens_per_device is None:
            micro = DEFAULT_MICRO_BATCH.get(engine)
        return cls(
            devices_per_node=res.devices_per_node,
            nodes=res.nodes,
            group_size=algo.group_size,
            train_batch_size=algo.train_batch_size,
            mini_batch_size=algo.mini_batch_size,
            micro_batch_size_per_device=micro,
            tokens_per_device=algo.tokens_per_device,
            tensor_parallel_size=spec.rollout.tensor_parallel_size,
            longest_sequence=spec.dataset.max_prompt_length + spec.dataset.max_response_length,
        )

    @property
    def devices(self) -> int:
        return self.devices_per_node * self.nodes

    @property
    def responses_per_update(self) -> int:
        return self.mini_batch_size * self.group_size

    @property
    def per_device_update(self) -> int:
        """Responses one device trains on per optimiser update."""
        return self.responses_per_update // self.devices

    @property
    def micro_batch(self) -> int:
        """Responses per forward pass (the default: a device's whole share of an update)."""
        return self.micro_batch_size_per_device or self.per_device_update

    @property
    def accumulation_steps(self) -> int:
        """Forward/backward passes per optimiser update on each device."""
        return max(self.per_device_update // self.micro_batch, 1)

    @property
    def updates_per_step(self) -> int:
        return self.train_batch_size // self.mini_batch_size


def batch_problems(batch: Batch) -> list[Problem]:
    """Every rule the sizes break; empty when the step splits evenly.

    These are verl's start-up rules (its `validate_config` and the actor's normalisation), which
    the TRL engine shares: responses per step and per update divide over the devices, an update
    divides into micro-batches, a step into updates, the rollout's tensor parallelism into a node,
    and a token budget holds one whole sequence.
    """
    world = batch.devices
    devices = (
        f"the {world} devices ({batch.devices_per_node} devices per node × {batch.nodes} node(s) = {world})"
    )
    problems: list[Problem] = []
    dynamic = batch.tokens_per_device is not None
    step = batch.train_batch_size * batch.group_size
    if not dynamic and step % world:
        problems.append(
            Problem(
                "spec.algorithm.trainBatchSize",
                f"trainBatchSize × groupSize = {batch.train_batch_size} × {batch.group_size} = {step} "
                f"responses per step must be divisible by {devices}; or set algorithm.tokensPerDevice",
            )
        )
    update = batch.responses_per_update
    if update % world:
        problems.append(
            Problem(
                "spec.algorithm.miniBatchSize",
                f"miniBatchSize × groupSize = {update} responses per update "
                f"({batch.mini_batch_size} × {batch.group_size}) must be divisible by {devices}",
            )
        )
    elif not dynamic and batch.micro_batch_size_per_device and batch.per_device_update % batch.micro_batch:
        problems.append(
            Problem(
                "spec.algorithm.microBatchSizePerDevice",
                f"each device gets {batch.per_device_update} responses per update (miniBatchSize × "
                f"groupSize / devices), which must be divisible by microBatchSizePerDevice {batch.micro_batch}",
            )
        )
    if batch.train_batch_size % batch.mini_batch_size:
        problems.append(
            Problem(
                "spec.algorithm.miniBatchSize",
                f"trainBatchSize={batch.train_batch_size} must be a multiple of "
                f"miniBatchSize={batch.mini_batch_size}",
            )
        )
    if batch.devices_per_node % batch.tensor_parallel_size:
        problems.append(
            Problem(
                "spec.rollout.tensorParallelSize",
                f"tensorParallelSize={batch.tensor_parallel_size} must divide "
                f"resources.devicesPerNode={batch.devices_per_node}",
            )
        )
    tokens = batch.tokens_per_device
    if tokens is not None and batch.longest_sequence and tokens < batch.longest_sequence:
        problems.append(
            Problem(
                "spec.algorithm.tokensPerDevice",
                f"tokensPerDevice={batch.tokens_per_device} must hold one whole prompt + response "
                f"({batch.longest_sequence} tokens), dataset.maxPromptLength + maxResponseLength",
            )
        )
    return problems


# --- the same rules for the API server -------------------------------------------------------------
#
# The rules above as CEL on the GRPOJob spec (crdgen.py puts them there), so `kubectl apply` refuses a
# job whose batch does not split with the very sentence batch_problems() writes. Defaults are in the
# stored object by the time CEL runs; only the optional sizes need has(). The two are held together
# by tests/integration/test_admission.py, which sends the same specs to the API server and to
# validation.validate().

_A = "self.algorithm"
_WORLD = "(self.resources.devicesPerNode * self.resources.nodes)"
_DYNAMIC = f"has({_A}.tokensPerDevice)"
_UPDATE = f"({_A}.miniBatchSize * {_A}.groupSize)"
_MICRO = f"(has({_A}.microBatchSizePerDevice) ? {_A}.microBatchSizePerDevice : {DEFAULT_MICRO_BATCH['verl']})"
_DEVICES = "the %d devices (%d devices per node × %d node(s) = %d)"
_DEVICES_ARGS = f"{_WORLD}, self.resources.devicesPerNode, self.resources.nodes, {_WORLD}"


def _rule(field: str, rule: str, message: str, args: str) -> dict[str, str]:
    """One CEL rule on the spec, its message formatted like a Problem's, and the field it names.

    `message` (the sentence without its numbers) is what a CEL evaluator without Kubernetes'
    format library reports (api/rules.py); the API server says the whole sentence."""
    return {
        "rule": rule,
        "message": message.replace("%d ", "").replace("%d", "N"),
        "messageExpression": f"'{message}'.format([{args}])",
        "fieldPath": "." + field.removeprefix("spec."),
        "reason": "FieldValueInvalid",
    }


CEL_RULES: list[dict[str, str]] = [
    _rule(
        "spec.algorithm.trainBatchSize",
        f"{_DYNAMIC} || ({_A}.trainBatchSize * {_A}.groupSize) % {_WORLD} == 0",
        "trainBatchSize × groupSize = %d × %d = %d responses per step must be divisible by "
        f"{_DEVICES}; or set algorithm.tokensPerDevice",
        f"{_A}.trainBatchSize, {_A}.groupSize, {_A}.trainBatchSize * {_A}.groupSize, {_DEVICES_ARGS}",
    ),
    _rule(
        "spec.algorithm.miniBatchSize",
        f"{_UPDATE} % {_WORLD} == 0",
        f"miniBatchSize × groupSize = %d responses per update (%d × %d) must be divisible by {_DEVICES}",
        f"{_UPDATE}, {_A}.miniBatchSize, {_A}.groupSize, {_DEVICES_ARGS}",
    ),
    _rule(
        "spec.algorithm.microBatchSizePerDevice",
        # verl's default micro-batch applies when none is given; the trl engine has none.
        f"{_DYNAMIC} || {_UPDATE} % {_WORLD} != 0 || "
        f"(!has({_A}.microBatchSizePerDevice) && self.engine.name != 'verl') || "
        f"({_UPDATE} / {_WORLD}) % {_MICRO} == 0",
        "each device gets %d responses per update (miniBatchSize × groupSize / devices), which must be "
        "divisible by microBatchSizePerDevice %d",
        f"{_UPDATE} / {_WORLD}, {_MICRO}",
    ),
    _rule(
        "spec.algorithm.miniBatchSize",
        f"{_A}.trainBatchSize % {_A}.miniBatchSize == 0",
        "trainBatchSize=%d must be a multiple of miniBatchSize=%d",
        f"{_A}.trainBatchSize, {_A}.miniBatchSize",
    ),
    _rule(
        "spec.rollout.tensorParallelSize",
        "self.resources.devicesPerNode % self.rollout.tensorParallelSize == 0",
        "tensorParallelSize=%d must divide resources.devicesPerNode=%d",
        "self.rollout.tensorParallelSize, self.resources.devicesPerNode",
    ),
    _rule(
        "spec.algorithm.tokensPerDevice",
        f"!{_DYNAMIC} || {_A}.tokensPerDevice >= "
        "self.dataset.maxPromptLength + self.dataset.maxResponseLength",
        "tokensPerDevice=%d must hold one whole prompt + response (%d tokens), "
        "dataset.maxPromptLength + maxResponseLength",
        f"{_A}.tokensPerDevice, self.dataset.maxPromptLength + self.dataset.maxResponseLength",
    ),
]
