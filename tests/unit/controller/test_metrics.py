"""The operator's /metrics: per-job gauges bounded by the live jobs, process metrics, handler times."""

from __future__ import annotations

from grpo_operator.metrics import Metrics
from prometheus_client import generate_latest


def _body(name: str, namespace: str = "team-a", **status) -> dict:
    return {"metadata": {"name": name, "namespace": namespace}, "status": status}


def _text(metrics: Metrics) -> str:
    return generate_latest(metrics.registry).decode()


RUNNING = {
    "phase": "Running",
    "attempt": 2,
    "progress": {"step": 40, "totalSteps": 300, "startupSeconds": 294},
    "metrics": {"reward": 0.8209, "valScore": 0.61, "tokensPerSecondPerDevice": 1250.0, "entropy": 0.4},
    "history": {"steps": "20 39 40", "reward": "0.7 0.8 0.8209", "responseLength": "300 410 512.5"},
    "conditions": [{"type": "Healthy", "status": "False", "reason": "Stalled"}],
}


def test_a_running_job_has_its_gauges():
    metrics = Metrics()
    metrics.observe(_body("geo3k", **RUNNING))
    text = _text(metrics)
    labels = 'name="geo3k",namespace="team-a"'
    assert f'grpo_job_phase{{{labels},phase="Running"}} 1.0' in text
    assert f'grpo_job_phase{{{labels},phase="Pending"}} 0.0' in text
    assert f"grpo_job_attempt{{{labels}}} 2.0" in text
    assert f"grpo_job_step{{{labels}}} 40.0" in text
    assert f"grpo_job_total_steps{{{labels}}} 300.0" in text
    assert f"grpo_job_startup_seconds{{{labels}}} 294.0" in text
    assert f"grpo_job_reward{{{labels}}} 0.8209" in text
    assert f"grpo_job_validation_score{{{labels}}} 0.61" in text
    assert f"grpo_job_tokens_per_second_per_device{{{labels}}} 1250.0" in text
    # The newest step's response length: the history's last point, which is that step alone.
    assert f"grpo_job_response_length{{{labels}}} 512.5" in text
    assert f"grpo_job_healthy{{{labels}}} 0.0" in text


def test_a_job_without_reports_has_no_empty_gauges():
    metrics = Metrics()
    metrics.observe(_body("fresh"))
    text = _text(metrics)
    assert 'grpo_job_phase{name="fresh",namespace="team-a",phase="Pending"} 0.0' in text
    assert 'grpo_job_reward{name="fresh"' not in text
    assert 'grpo_job_healthy{name="fresh"' not in text


def test_series_are_bounded_by_the_live_jobs():
    metrics = Metrics()
    for index in range(50):
        metrics.observe(_body(f"job-{index}", **RUNNING))
    metrics.observe(_body("job-0", **{**RUNNING, "attempt": 3}))  # an update, not a new series
    assert _text(metrics).count("grpo_job_attempt{") == 50
    for index in range(50):
        metrics.forget("team-a", f"job-{index}")
    text = _text(metrics)
    assert "grpo_job_attempt{" not in text
    assert "grpo_job_phase{" not in text


def test_process_and_operator_metrics_are_served():
    text = _text(Metrics())
    assert "process_resident_memory_bytes" in text
    assert "process_cpu_seconds_total" in text
    assert "python_info" in text
    assert "grpo_handler_duration_seconds" in text
    assert 'grpo_jobs{phase="Running"} 0.0' in text


def test_failed_attempts_count_once_each_by_reason_and_survive_the_jobs_deletion():
    metrics = Metrics()
    failed = [{"attempt": 1, "reason": "OutOfMemory", "retryable": True}]
    body = {"metadata": {"name": "j", "namespace": "a", "uid": "u1"}, "status": {"failedAttempts": failed}}
    metrics.observe(body)
    metrics.observe(body)  # the same status again (every watch event): no second count
    failed.append({"attempt": 2, "reason": "OutOfMemory", "retryable": True})
    metrics.observe(body)
    other = {"attempt": 1, "reason": "NodeLost", "retryable": True}
    metrics.observe(
        {"metadata": {"name": "k", "namespace": "a", "uid": "u2"}, "status": {"failedAttempts": [other]}}
    )
    metrics.forget("a", "j")
    text = _text(metrics)
    assert 'grpo_job_attempt_failures_total{reason="OutOfMemory"} 2.0' in text
    assert 'grpo_job_attempt_failures_total{reason="NodeLost"} 1.0' in text
    # The same name again is a new job (a new uid): its first failure counts.
    metrics.observe(
        {"metadata": {"name": "j", "namespace": "a", "uid": "u3"}, "status": {"failedAttempts": failed[:1]}}
    )
    assert 'grpo_job_attempt_failures_total{reason="OutOfMemory"} 3.0' in _text(metrics)


def test_eta_kl_and_the_ray_cluster_for_links():
    metrics = Metrics()
    url = "j-1-rc-head-svc.a.svc.cluster.local:8265"
    status = {
        "phase": "Running",
        "attempt": 1,
        "progress": {"etaSeconds": 5400, "attempt": 1},
        "metrics": {"kl": 0.012},
        "rayClusterName": "j-1-rc",
        "dashboardURL": url,
    }
    metrics.observe(_body("j", "a", **status))
    text = _text(metrics)
    assert 'grpo_job_eta_seconds{name="j",namespace="a"} 5400.0' in text
    # Once it has ended (or while suspended), no estimate is true any more.
    metrics.observe(_body("j", "a", **{**status, "phase": "Succeeded"}))
    assert "grpo_job_eta_seconds{" not in _text(metrics)
    assert 'grpo_job_kl{name="j",namespace="a"} 0.012' in text
    assert (
        f'grpo_job_ray_cluster_info{{dashboard_url="{url}",name="j",namespace="a",ray_cluster="j-1-rc"}} 1.0'
        in text
    )
