"""benchmarks.chaos's judgement of where each job must end: a suspended job resumes into the
attempt after the one it was suspended in, and into the first when it had none yet."""

from __future__ import annotations

from typing import Any

from benchmarks import chaos

CHILDREN = {(kind, name.format("chaos-16")) for kind, (_, name) in chaos.CHILDREN.items()}


def running(attempt: int, suspended: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"uid": "u"},
        "spec": {"runPolicy": {"suspend": suspended}},
        "status": {
            "phase": "Running",
            "attempt": attempt,
            "conditions": [{"type": "Created", "status": "True"}],
        },
    }


def test_a_job_suspended_in_its_first_attempt_must_resume_into_a_later_one() -> None:
    job = chaos.Job("suspend", "ns", "chaos-16", attempt_at_suspend=1)
    assert chaos.expected(job, running(1), CHILDREN) == "phase=Running attempt=1 failed=None created=True"
    assert chaos.expected(job, running(2), CHILDREN) is None
    assert chaos.expected(job, running(2, suspended=True), CHILDREN) is not None


def test_a_job_suspended_before_any_attempt_resumes_into_the_first() -> None:
    job = chaos.Job("suspend", "ns", "chaos-16", attempt_at_suspend=0)
    assert chaos.expected(job, running(1), CHILDREN) is None
    # Children missing is still stuck, whatever the attempt.
    assert chaos.expected(job, running(1), set()) is not None
