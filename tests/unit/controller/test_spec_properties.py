"""Whatever spec the CRD admits, the operator validates, plans and builds it in bounded time.

Hypothesis draws specs from the generated CRD's own schema: each quantity field's value from the
pattern the CRD carries (and, beside it, the exponent form at any size, `1e9999999` and the like,
which that pattern must refuse), each bounded number at its bounds. What the schema refuses never
reaches the operator (the API server says so, naming the field); the operator's own parser must
refuse it too without building the number. What it admits goes the reconcile's pure way —
the models, `validate`, `plan_with_children` — with no exception escaping, within 100 ms, and
a child that cannot be built fails the job `InvalidSpec` naming the field.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from grpo_operator.api.crdgen import build_crd
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.children.attempt import UNBUILDABLE_FIELD
from grpo_operator.config import Settings
from grpo_operator.handlers.reconcile import plan_with_children
from grpo_operator.validation import validate
from grpo_operator.verdict import schema_problems
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from support.operator_inputs import minimal_body

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SETTINGS = Settings()
BUDGET_S = 0.1
"""The longest one spec may hold the operator's event loop (issue 58: the Lease renewal and
/healthz share it)."""
REPEATS = 3
"""Each spec is timed this many times and its fastest run compared with BUDGET_S: the work is
deterministic, so its fastest run is its cost, and what a loaded 2-core CI machine adds (another
process scheduled, a garbage collection) only ever makes a run slower. A spec that really blocks
(the exact 10**9999999 of issue 58 took minutes) is slow on every run."""
EXTENDED_KEY = "example.com/fpga"
"""An extended resource's name for extraResources' values (whole numbers, by the CRD's rule)."""

_SPEC_SCHEMA = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


def _leaves(
    schema: dict[str, Any], path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """Every scalar field of the spec's schema outside lists, with its path (`*`: a map's value)."""
    if schema.get("type") == "object":
        for key, sub in (schema.get("properties") or {}).items():
            yield from _leaves(sub, (*path, key))
        if isinstance(schema.get("additionalProperties"), dict):
            yield from _leaves(schema["additionalProperties"], (*path, "*"))
    elif schema.get("type") != "array":
        yield path, schema


_FIELDS = list(_leaves(_SPEC_SCHEMA))
QUANTITY_FIELDS = {path: s for path, s in _FIELDS if "KMGTPE" in s.get("pattern", "")}
BOUNDED_NUMBERS = {
    path: s
    for path, s in _FIELDS
    if s.get("type") in ("integer", "number") and "minimum" in s and "maximum" in s
}


def test_the_schema_has_the_fields_the_properties_draw_from() -> None:
    """A test that draws nothing proves nothing: the walk finds what issue 58 named."""
    assert ("rollout", "memoryBudget") in QUANTITY_FIELDS
    assert ("resources", "cpuPerNode") in QUANTITY_FIELDS
    assert ("resources", "extraResources", "*") in QUANTITY_FIELDS
    assert len(QUANTITY_FIELDS) >= 6
    assert len(BOUNDED_NUMBERS) >= 30


def _schema_admits(schema: dict[str, Any], value: str) -> bool:
    """The CRD schema's own check of a string (the API server's pattern and length; its CEL rules
    are the models', which mirror them)."""
    return len(value) <= schema.get("maxLength", math.inf) and re.search(schema["pattern"], value) is not None


def _field_name(path: tuple[str, ...]) -> str:
    return "spec." + ".".join(EXTENDED_KEY if part == "*" else part for part in path)


def _set(spec: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = spec
    for part in path[:-1]:
        node = node.setdefault(EXTENDED_KEY if part == "*" else part, {})
    node[EXTENDED_KEY if path[-1] == "*" else path[-1]] = value


def _bounds(schema: dict[str, Any]) -> list[int | float]:
    """A number field's admitted extremes (an exclusive bound's nearest admitted neighbour)."""
    low, high = schema["minimum"], schema["maximum"]
    if schema.get("exclusiveMinimum"):
        low = math.nextafter(low, math.inf)
    if schema.get("exclusiveMaximum"):
        high = math.nextafter(high, -math.inf)
    return [low, high]


_MANTISSA = st.from_regex(r"[0-9]{1,12}(\.[0-9]{0,6})?|\.[0-9]{1,6}", fullmatch=True)
QUANTITIES = st.one_of(
    # What the CRD's pattern itself admits.
    st.from_regex(next(iter(QUANTITY_FIELDS.values()))["pattern"], fullmatch=True).filter(
        lambda v: len(v) <= 32
    ),
    # Kubernetes' grammar at any exponent (issue 58: 1e9999999, 1e400), for the pattern to refuse.
    st.builds(
        lambda mantissa, e, sign, exponent: f"{mantissa}{e}{sign}{exponent}",
        _MANTISSA,
        st.sampled_from("eE"),
        st.sampled_from(["", "+", "-"]),
        st.one_of(st.integers(0, 10**7), st.sampled_from([99, 100, 400, 3000, 9999999])),
    ),
    # At the bounds the CEL rules draw: zero, the 1Gi budget floor, the 1E ceiling and around it.
    st.sampled_from(
        [
            "0",
            "1Gi",
            "1073741823",
            "1E",
            "1000P",
            "1e18",
            "1000000000000000001",
            "1e19",
            "8Ei",
            "1n",
            "1e-99",
            "9" * 30 + "E",
        ]
    ),
)
CHANGES = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(sorted(QUANTITY_FIELDS)), QUANTITIES),
        st.sampled_from(sorted(BOUNDED_NUMBERS)).flatmap(
            lambda path: st.tuples(st.just(path), st.sampled_from(_bounds(BOUNDED_NUMBERS[path])))
        ),
    ),
    min_size=1,
    max_size=3,
)


def _fastest(run: Callable[[], Any]) -> tuple[Any, float]:
    """`run`'s result and its fastest time of REPEATS runs (see REPEATS for why the fastest)."""
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return result, min(times)


def _pipeline(body: dict[str, Any]) -> tuple[str, list[str], str]:
    """The reconcile's pure way for a job body: (phase, the fields its problems name, message)."""
    try:
        job = GRPOJob.model_validate(body)
    except ValidationError as error:
        # The reconcile fails such a job InvalidSpec with these problems (_fail_unparseable).
        problems = schema_problems(error)
        return "Failed", [p.field for p in problems], "; ".join(map(str, problems))
    problems = validate(job, SETTINGS)
    result, children, problems = plan_with_children(
        job, None, problems, NOW, SETTINGS, due=lambda planned: bool(planned.create_attempt)
    )
    if children is not None:
        json.dumps(children.rayjob)  # what the API client sends
        assert children.rayjob["metadata"]["name"] == "demo-1"
    failed = next((c for c in result.status["conditions"] if c["type"] == "Failed"), None)
    message = failed["message"] if failed else ""
    return result.status["phase"], [p.field for p in problems], message


@settings(
    max_examples=200,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(changes=CHANGES)
def test_every_admitted_spec_is_validated_planned_and_built_within_budget(
    changes: list[tuple[tuple[str, ...], Any]],
) -> None:
    body = minimal_body()
    final = dict(changes)  # a field drawn twice holds its last value
    for path, value in final.items():
        _set(body["spec"], path, value)
    refused = [
        (path, value)
        for path, value in final.items()
        if path in QUANTITY_FIELDS and not _schema_admits(QUANTITY_FIELDS[path], value)
    ]
    if refused:
        # The API server refuses it at admission, naming the field; the operator's models (what
        # any reader of a stored spec runs) refuse it too, without building the number.
        path, value = refused[0]
        assert not re.fullmatch(r"[0-9.]+[eE][-+]?[0-9]{1,2}", value) or len(value) > 32, value
        outcome, elapsed = _fastest(lambda: _pipeline(body))
        assert outcome[0] == "Failed"
        assert _field_name(path) in outcome[1], outcome
        assert elapsed < BUDGET_S, f"{value!r} refused in {elapsed * 1000:.0f} ms"
        return
    (phase, fields, message), elapsed = _fastest(lambda: _pipeline(body))
    assert elapsed < BUDGET_S, f"{changes} took {elapsed * 1000:.0f} ms"
    # The general guard (children/attempt.py) is for bugs: what a builder cannot make from an
    # admitted spec, it says by the field's own name.
    assert UNBUILDABLE_FIELD not in fields, message
    if fields:
        # Refused by the models, validation or a builder: Failed/InvalidSpec, naming each field.
        assert phase == "Failed"
        for field in fields:
            assert field.split("[")[0] in message, (field, message)
    else:
        assert phase == "Pending", message
