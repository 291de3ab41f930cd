"""`kubectl grpo list`: the jobs of a namespace (or of all) as `kubectl get` prints them.

The columns are the CRD's printer columns (what `kubectl get grpojobs` shows) plus, with
`-o wide`, the trainer's ETA and the reason of the newest condition; the values come from the
status as the operator and trainer wrote it, never recomputed here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from grpo_operator.api.v1alpha1 import GROUP, KIND, VERSION

from .show import duration


def as_list(bodies: list[dict[str, Any]]) -> dict[str, Any]:
    """A `kind: List`, as `kubectl get -o yaml` prints several objects."""
    items = [{"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, **body} for body in bodies]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _age(created: str | None, now: datetime) -> str:
    if not created:
        return "-"
    try:
        then = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return "-"
    return duration((now - then).total_seconds())


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, int | float) and not isinstance(value, bool) else "-"


def _reason(status: dict[str, Any]) -> str:
    conditions = sorted(status.get("conditions") or [], key=lambda c: c.get("lastTransitionTime") or "")
    return conditions[-1].get("reason", "-") if conditions else "-"


def row(body: dict[str, Any], now: datetime, *, wide: bool) -> list[str]:
    meta, status = body["metadata"], body.get("status") or {}
    progress, metrics = status.get("progress") or {}, status.get("metrics") or {}
    cells = [
        meta["name"],
        status.get("phase") or "-",
        str(progress.get("steps") or progress.get("step") or "-"),
        _number(metrics.get("reward")),
        _number(metrics.get("valScore")),
        str(status.get("attempt") or "-"),
        _age(meta.get("creationTimestamp"), now),
    ]
    if wide:
        cells += [str(status.get("eta") or "-"), _reason(status)]
    return cells


def table(bodies: list[dict[str, Any]], *, namespaces: bool, wide: bool, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    header = ["NAME", "PHASE", "STEP", "REWARD", "VAL", "ATTEMPT", "AGE"] + (
        ["ETA", "REASON"] if wide else []
    )
    rows = [row(body, now, wide=wide) for body in bodies]
    if namespaces:
        header = ["NAMESPACE", *header]
        rows = [[body["metadata"]["namespace"], *cells] for body, cells in zip(bodies, rows, strict=True)]
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "   ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in [header, *rows]
    )
