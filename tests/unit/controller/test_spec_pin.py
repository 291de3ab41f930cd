"""The spec ConfigMap is pinned to the spec as written: what decides whether a later attempt keeps
it or renders it again (children/configmap.py)."""

from __future__ import annotations

import copy
import json

from grpo_operator.api import contract
from grpo_operator.children.configmap import (
    RENDERED_FROM_ANNOTATION,
    build_spec_configmap,
    is_pinned,
    written_spec_digest,
)
from grpo_operator.config import load_settings
from support.operator_inputs import job_from, minimal_body

SETTINGS = load_settings(environ={})


def _rendered_by_an_older_release(configmap: dict, clip_ratio: float) -> dict:
    """The ConfigMap as a release whose default algorithm.clipRatio was `clip_ratio` rendered it."""
    older = copy.deepcopy(configmap)
    resolved = json.loads(older["data"][contract.SPEC_KEY])
    resolved["spec"]["algorithm"]["clipRatio"] = clip_ratio
    older["data"][contract.SPEC_KEY] = json.dumps(resolved)
    return older


def test_the_configmap_names_the_written_spec_it_was_rendered_from() -> None:
    job = job_from(minimal_body())
    configmap = build_spec_configmap(job, SETTINGS)
    assert configmap["metadata"]["annotations"] == {RENDERED_FROM_ANNOTATION: written_spec_digest(job)}
    assert is_pinned(configmap, job)


def test_a_render_with_other_defaults_is_kept_for_the_same_written_spec() -> None:
    job = job_from(minimal_body())
    older = _rendered_by_an_older_release(build_spec_configmap(job, SETTINGS), 0.28)
    # The job, read again by this release (its default clipRatio 0.2): the same spec as written.
    again = job_from(minimal_body())
    assert again.spec.algorithm.clip_ratio == 0.2
    assert is_pinned(older, again)


def test_the_digest_reads_only_what_was_written() -> None:
    body = minimal_body()
    # The default written out is a different spec as written, though it resolves the same.
    written_out = job_from(body, **{"algorithm.clipRatio": 0.2})
    assert written_out.spec == job_from(body).spec
    assert written_spec_digest(written_out) != written_spec_digest(job_from(body))


def test_an_edit_renders_again_and_suspend_does_not() -> None:
    job = job_from(minimal_body())
    configmap = build_spec_configmap(job, SETTINGS)
    assert not is_pinned(configmap, job_from(minimal_body(), **{"algorithm.learningRate": 2e-6}))
    assert not is_pinned(configmap, job_from(minimal_body(), **{"runPolicy.backoffLimit": 5}))
    suspended = job_from(minimal_body(), **{"runPolicy.suspend": True})
    resumed = job_from(minimal_body(), **{"runPolicy.suspend": False})
    assert is_pinned(configmap, suspended)
    assert is_pinned(configmap, resumed)


def test_a_configmap_without_the_annotation_is_rendered_again() -> None:
    job = job_from(minimal_body())
    configmap = build_spec_configmap(job, SETTINGS)
    del configmap["metadata"]["annotations"]
    assert not is_pinned(configmap, job)
    assert not is_pinned({}, job)
