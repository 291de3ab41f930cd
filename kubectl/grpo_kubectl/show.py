"""`kubectl grpo status`: a job's state in the words of someone who runs training jobs."""

from __future__ import annotations

from typing import Any

from grpo_operator.api.v1alpha1.spec import EngineSpec, ResourcesSpec, RunPolicy
from grpo_operator.api.v1alpha1.status import current_eta_seconds, latest_response_length
from pydantic import BaseModel


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 10 and seconds != int(seconds):
        return f"{seconds:.1f}s"  # a step of 0.62 s is "0.6s", not "0s"
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m" if minutes else f"{seconds}s"


def _num(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, int | float) else "-"


def _default(model: type[BaseModel], field: str) -> Any:
    """The default the API gives a field the job left out (the model says it, not this module)."""
    return model.model_fields[field].default


def describe(body: dict[str, Any]) -> str:
    meta, spec, status = body["metadata"], body.get("spec") or {}, body.get("status") or {}
    lines = [f"{meta['namespace']}/{meta['name']}: {status.get('phase') or 'not reconciled yet'}"]
    for section in (_hardware, _attempt, _progress, _metrics, _health, _checkpoint, _outputs, _log):
        lines += section(meta["name"], spec, status)
    lines += _conditions(status) + _failed_attempts(meta["name"], status)
    return "\n".join(lines)


def _hardware(name: str, spec: dict[str, Any], status: dict[str, Any]) -> list[str]:
    resources = spec.get("resources") or {}
    nodes = resources.get("nodes", _default(ResourcesSpec, "nodes"))
    devices = resources.get("devicesPerNode", _default(ResourcesSpec, "devices_per_node"))
    engine = (spec.get("engine") or {}).get("name", _default(EngineSpec, "name"))
    return [f"  hardware   {nodes} × {devices} {resources.get('accelerator', '?')}, engine {engine}"]


def _attempt(name: str, spec: dict[str, Any], status: dict[str, Any]) -> list[str]:
    attempts = status.get("attempt")
    if not attempts:
        return []
    backoff = (spec.get("runPolicy") or {}).get("backoffLimit", _default(RunPolicy, "backoff_limit"))
    return [f"  attempt    {attempts} of at most {backoff + 1}   Ray job {status.get('rayJobName', '-')}"]


def _progress(name: str, spec: dict[str, Any], status: dict[str, Any]) -> list[str]:
    progress = status.get("progress") or {}
    if not progress:
        return []
    percent = progress.get("percent")
    return [
        f"  progress   step {progress.get('steps') or progress.get('step', 0)}"
        + (f" ({percent:g}%)" if isinstance(percent, int | float) else "")
        + (f", epoch {progress['epoch']}" if progress.get("epoch") is not None else "")
        + f", ETA {duration(current_eta_seconds(status))}"
        + (f", last step at {progress['lastStepAt']}" if progress.get("lastStepAt") else "")
        + _startup(progress)
    ]


def _startup(progress: dict[str, Any]) -> str:
    """The reporting attempt's start-up to its first step, to the second: a retry's is compared
    with the first attempt's, where minutes alone would hide the difference."""
    seconds = progress.get("startupSeconds")
    if not isinstance(seconds, int | float):
        return ""
    minutes, rest = divmod(int(seconds), 60)
    took = f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"
    return f", start-up {took}" + (f" (attempt {progress['attempt']})" if progress.get("attempt") else "")


def _metrics(name: str, spec: dict[str, Any], status: dict[str, Any]) -> list[str]:
    metrics = status.get("metrics") or {}
    if not metrics:
        return []
    return [
        f"  metrics    reward {_num(metrics.get('reward'))}  val {_num(metrics.get('valScore'))}  "
        f"length {_num(latest_response_length(status))}  entropy {_num(metrics.get('entropy'))}  "
        f"kl {_num(metrics.get('kl'))}  step {duration(metrics.get('stepSeconds'))}  "
        f"tokens/s/device {_num(metrics.get('tokensPerSecondPerDevice'))}"
    ]


def _health(name: str, spec: dict[str, Any], status: dict[str, Any]) -> list[str]:
    health = status.get("health")
    if not health:
        return []
    verdict = "healthy" if health.get("healthy") else f"SICK: {health.get('reason')}: {health.get('message')}"
    return [f"  health     {verdict}"]


def _checkpoint(name: str, spec: dict[str, Any], status: dict[str, Any]) -> list[str]:
    checkpoint = status.get("checkpoint") or {}
    if checkpoint.get("latestStep") is None:
        return []
    return [
        f"  checkpoint step {checkpoint['latestStep']} at {checkpoint.get('path')} ({checkpoint.get('savedAt')})"
    ]


def _outputs(name: str, spec: dict[str, Any], status: dict[str, Any]) -> list[str]:
    outputs = status.get("outputs") or {}
    if not outputs:
        return []
    return [f"  exported   step {outputs.get('step')}: {outputs.get('model') or outputs.get('loraAdapter')}"]


def _log(name: str, spec: dict[str, Any], status: dict[str, Any]) -> list[str]:
    log = status.get("log") or {}
    return [f"  log        {log.get('path')} (kubectl grpo logs {name})"] if log else []


def _conditions(status: dict[str, Any]) -> list[str]:
    conditions = status.get("conditions") or []
    if not conditions:
        return []
    return ["  conditions"] + [
        f"    {cond['type']:<10} {cond['status']:<5} {cond.get('reason', '')}: {cond.get('message', '')}"
        for cond in conditions
    ]


def _what_followed(item: dict[str, Any], status: dict[str, Any]) -> str:
    """What became of a failed attempt: a later attempt, one on its way, or the end of the job."""
    current = status.get("attempt") or item["attempt"]
    if item["attempt"] < current:
        return f"retried as attempt {item['attempt'] + 1}"
    if not item.get("retryable"):
        return "not retryable"
    if status.get("phase") in ("Pending", "Restarting", "Running"):
        return "retrying"
    failed = next((c for c in status.get("conditions") or [] if c.get("type") == "Failed"), None)
    why = failed.get("reason") if failed and failed.get("status") == "True" else None
    return f"retryable, not retried: {why}" if why else "retryable, not retried"


def _failed_attempts(name: str, status: dict[str, Any]) -> list[str]:
    failed = status.get("failedAttempts") or []
    lines = ["  failed attempts"] if failed else []
    for item in failed:
        again = _what_followed(item, status)
        lines.append(f"    {item['attempt']}: {item['reason']} ({again}): {item.get('message', '')}")
        if item.get("logFile"):
            lines.append(f"       log: kubectl grpo logs {name} --attempt {item['attempt']}")
    return lines
