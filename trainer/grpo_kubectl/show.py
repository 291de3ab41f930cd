"""`kubectl grpo status`: a job's state in the words of someone who runs training jobs."""

from __future__ import annotations

from typing import Any


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
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


def describe(body: dict[str, Any]) -> str:
    meta, spec, status = body["metadata"], body.get("spec") or {}, body.get("status") or {}
    progress, metrics = status.get("progress") or {}, status.get("metrics") or {}
    lines = [f"{meta['namespace']}/{meta['name']}: {status.get('phase') or 'not reconciled yet'}"]
    resources = spec.get("resources") or {}
    lines.append(
        f"  hardware   {resources.get('nodes', 1)} × {resources.get('devicesPerNode', 8)} "
        f"{resources.get('accelerator', '?')}, engine {(spec.get('engine') or {}).get('name', 'verl')}"
    )
    attempts = status.get("attempt")
    if attempts:
        limit = ((spec.get("runPolicy") or {}).get("backoffLimit", 3)) + 1
        lines.append(f"  attempt    {attempts} of at most {limit}   Ray job {status.get('rayJobName', '-')}")
    if progress:
        percent = progress.get("percent")
        lines.append(
            f"  progress   step {progress.get('steps') or progress.get('step', 0)}"
            + (f" ({percent:g}%)" if isinstance(percent, int | float) else "")
            + (f", epoch {progress['epoch']}" if progress.get("epoch") is not None else "")
            + f", ETA {_duration(progress.get('etaSeconds'))}"
            + (f", last step at {progress['lastStepAt']}" if progress.get("lastStepAt") else "")
        )
    if metrics:
        lines.append(
            f"  metrics    reward {_num(metrics.get('reward'))}  val {_num(metrics.get('valScore'))}  "
            f"length {_num(metrics.get('responseLength'))}  entropy {_num(metrics.get('entropy'))}  "
            f"kl {_num(metrics.get('kl'))}  step {_duration(metrics.get('stepSeconds'))}  "
            f"tokens/s/device {_num(metrics.get('tokensPerSecondPerDevice'))}"
        )
    health = status.get("health")
    if health:
        verdict = (
            "healthy" if health.get("healthy") else f"SICK: {health.get('reason')}: {health.get('message')}"
        )
        lines.append(f"  health     {verdict}")
    checkpoint = status.get("checkpoint") or {}
    if checkpoint.get("latestStep") is not None:
        lines.append(
            f"  checkpoint step {checkpoint['latestStep']} at {checkpoint.get('path')} ({checkpoint.get('savedAt')})"
        )
    outputs = status.get("outputs") or {}
    if outputs:
        lines.append(
            f"  exported   step {outputs.get('step')}: {outputs.get('model') or outputs.get('loraAdapter')}"
        )
    log = status.get("log") or {}
    if log:
        lines.append(f"  log        {log.get('path')} (kubectl grpo logs {meta['name']})")
    conditions = status.get("conditions") or []
    if conditions:
        lines.append("  conditions")
        for cond in conditions:
            lines.append(
                f"    {cond['type']:<10} {cond['status']:<5} {cond.get('reason', '')}: {cond.get('message', '')}"
            )
    failed = status.get("failedAttempts") or []
    if failed:
        lines.append("  failed attempts")
        for item in failed:
            again = "retried" if item.get("retryable") else "not retried"
            lines.append(f"    {item['attempt']}: {item['reason']} ({again}): {item.get('message', '')}")
            if item.get("logFile"):
                lines.append(f"       log: kubectl grpo logs {meta['name']} --attempt {item['attempt']}")
    return "\n".join(lines)
