"""Between verl's two reward contracts: one response per call, or lists of them.

verl 0.9 reward managers (naive, dapo) call only `compute_score(data_source, solution_str,
ground_truth, extra_info, **kw)`; verl 0.7 also had a `batch` manager calling
`compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **kw) -> list`.
`adapt_batch` lets a batch function serve the first contract, `as_batch` a per-sample one the second.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

SampleFn = Callable[..., Any]
BatchFn = Callable[..., list[Any]]


def rows(
    data_sources: Sequence[Any] | None,
    solution_strs: Sequence[Any] | None,
    ground_truths: Sequence[Any] | None,
    extra_infos: Sequence[Any] | None,
) -> Iterator[tuple[Any, Any, Any, Any]]:
    """One tuple per response; a shorter or missing column reads as None rather than truncating."""
    solutions = list(solution_strs or [])
    columns = [
        list(column) if column is not None else [] for column in (data_sources, ground_truths, extra_infos)
    ]
    for index, solution in enumerate(solutions):
        source, truth, info = (column[index] if index < len(column) else None for column in columns)
        yield source, solution, truth, info


def adapt_batch(batch_fn: BatchFn) -> SampleFn:
    """A per-sample `compute_score` that calls `batch_fn` with lists of one and returns its item."""

    @functools.wraps(batch_fn)
    def compute_score(
        data_source: Any, solution_str: Any, ground_truth: Any, extra_info: Any = None, **kwargs: Any
    ) -> Any:
        results = batch_fn([data_source], [solution_str], [ground_truth], [extra_info], **kwargs)
        return next(iter(results))

    return compute_score


def as_batch(sample_fn: SampleFn) -> BatchFn:
    """A `compute_score_batch` that calls `sample_fn` once per response."""

    @functools.wraps(sample_fn)
    def compute_score_batch(
        data_sources: Sequence[Any],
        solution_strs: Sequence[Any],
        ground_truths: Sequence[Any],
        extra_infos: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[Any]:
        return [
            sample_fn(source, solution, truth, info, **kwargs)
            for source, solution, truth, info in rows(data_sources, solution_strs, ground_truths, extra_infos)
        ]

    return compute_score_batch
