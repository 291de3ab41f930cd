"""The colour job's lives, as both real-path e2e modules run them: tests/e2e/test_real_training.py
(the trainer under the host's real Ray head) and tests/e2e/test_real_pods.py (the trainer in Ray
pods of the CPU trainer image on the real node). The job is examples/colours-cpu.yaml, shortened;
what differs between the two is only how a test reaches the trainer (a host pid or a pod) and
where the job's folder is seen from (the pod view's host folder or the claim's volume)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from grpo_operator.api.documents import job_document
from grpo_operator.api.v1alpha1.status import history_points

from support.cluster import REPO_ROOT, Cluster

EXAMPLE = REPO_ROOT / "examples" / "colours-cpu.yaml"


def colour_job(name: str, steps: int, save_every: int, **sections: dict[str, Any]) -> list[dict[str, Any]]:
    """examples/colours-cpu.yaml (its reward ConfigMap too) as job ``name``: ``steps`` steps, a
    checkpoint every ``save_every``, and each of ``sections`` merged into that spec section."""
    documents = [d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d]
    job = job_document(EXAMPLE.read_text(), EXAMPLE.name)
    job["metadata"]["name"] = name
    job["spec"]["algorithm"]["totalSteps"] = steps
    job["spec"]["checkpoint"]["saveInterval"] = save_every
    for section, values in sections.items():
        job["spec"][section] = {**job["spec"].get(section, {}), **values}
    return [*[d for d in documents if d.get("kind") != "GRPOJob"], job]


def paced(documents: list[dict[str, Any]], seconds: float) -> list[dict[str, Any]]:
    """The colour job's documents with its reward sleeping `seconds` a call (16 x 8 calls a step),
    so that a run lasts while a test or a benchmark acts on it, however idle the machine."""
    for document in documents:
        if document.get("kind") == "ConfigMap" and "reward.py" in document.get("data", {}):
            document["data"]["reward.py"] += (
                "\n\nimport time as _time\n_unpaced = compute_score\n\n\n"
                "def compute_score(*args, **kwargs):\n"
                f"    _time.sleep({seconds})\n"
                "    return _unpaced(*args, **kwargs)\n"
            )
    return documents


def status(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    job = cluster.get("grpojob", name, namespace)
    assert job is not None, f"grpojob {name} is gone"
    return dict(job.get("status") or {})


def wait_status(
    cluster: Cluster,
    namespace: str,
    name: str,
    condition: Callable[[dict[str, Any]], bool],
    what: str,
    timeout: float,
) -> dict[str, Any]:
    job = cluster.wait_for(
        "grpojob", name, namespace, lambda j: condition(j.get("status") or {}), timeout=timeout, what=what
    )
    return dict(job.get("status") or {})


def phase_is(*phases: str) -> Callable[[dict[str, Any]], bool]:
    return lambda s: s.get("phase") in phases


def checkpoint_at_least(step: int) -> Callable[[dict[str, Any]], bool]:
    return lambda s: ((s.get("checkpoint") or {}).get("latestStep") or 0) >= step


def step_at_least(step: int) -> Callable[[dict[str, Any]], bool]:
    return lambda s: ((s.get("progress") or {}).get("step") or 0) >= step


def complete_checkpoints(folder: Path) -> list[int]:
    """The steps of the job folder's checkpoints that were complete (the trainer's state written)."""
    return sorted(
        int(p.name.removeprefix("checkpoint-"))
        for p in (folder / "checkpoints").glob("checkpoint-*")
        if (p / "trainer_state.json").is_file()
    )


def metric_steps(folder: Path, attempt: int) -> list[int]:
    path = folder / "metrics" / f"attempt-{attempt}.jsonl"
    return [json.loads(line)["step"] for line in path.read_text().splitlines() if '"data"' in line]


def assert_history_covers_every_step_once(status_: dict[str, Any], steps: int) -> None:
    got = [point["step"] for point in history_points(status_)]
    assert got == list(range(1, steps + 1)), got


def assert_resumed_after_a_kill(done: dict[str, Any], folder: Path, resume_step: int, steps: int) -> None:
    """Attempt 1 died after checkpoint ``resume_step`` (a retryable failure); attempt 2 resumed
    from it, trained the steps after it once each (its metrics in the job folder) and finished."""
    assert done["phase"] == "Succeeded", done.get("conditions")
    assert done["attempt"] == 2
    assert [f["attempt"] for f in done["failedAttempts"]] == [1]
    assert done["failedAttempts"][0]["retryable"] is True
    assert done["checkpoint"]["resumedFromStep"] == resume_step
    assert done["progress"]["step"] == steps
    # Attempt 2's own start-up, dated by its own first step, not attempt 1's.
    assert done["progress"]["attempt"] == 2
    assert isinstance(done["progress"].get("startupSeconds"), int), done["progress"]
    assert metric_steps(folder, 2) == list(range(resume_step + 1, steps + 1))
    assert_history_covers_every_step_once(done, steps)
