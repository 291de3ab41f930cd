"""Reward throughput: grade one geo3k step (512 prompts x 5 responses) the ways engines call us.

    .venv/bin/python benchmarks/rewards_bench.py [--prompts 512] [--n 5] [--timeout-s 2.0] [--json out.json]

Responses are generated (seeded) to look like a Qwen-VL rollout on geo3k: correct answers in the
ground truth's form and in other forms (decimal for a fraction, `x = `, degrees, `\\dfrac`), wrong
answers, malformed ones (no `<think>`, no box, unclosed box), long ones (up to ~24k characters,
some cut off before the box), garbage (random unicode), symbolic answers that need sympy, and a
couple of adversarial ones that sympy cannot settle in time (they must stop at the bound).

Three paths are timed after the sympy workers are warm (their one-time start is reported apart):
- per-sample, sequential: `geo3k.compute_score` once per response (what verl's naive manager calls);
- per-sample, threaded: the same from a thread pool, as verl's `run_in_executor(None, ...)` does;
- batch: one `geo3k.compute_score_batch` call over all responses.
Targets (issue 4): under 10 s for the 2,560 and no single answer over `--timeout-s`.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import platform
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trainer"))

from grpo_trainer.rewards import geo3k
from grpo_trainer.rewards.answer_parse import normalize, parse
from grpo_trainer.rewards.equivalence import numeric_verdict
from grpo_trainer.rewards.sympy_pool import default_pool

DATA_SOURCE = "hiyouga/geometry3k"
WORDS = [
    "the",
    "triangle",
    "angle",
    "side",
    "length",
    "radius",
    "circle",
    "chord",
    "tangent",
    "area",
    "perimeter",
    "parallel",
    "perpendicular",
    "bisector",
    "similar",
    "congruent",
    "so",
    "therefore",
    "we",
    "get",
    "using",
    "Pythagorean",
    "theorem",
    "substitute",
    "solve",
    "for",
    "x",
    "equals",
    "segment",
    "arc",
    "measure",
    "degrees",
]


@dataclass(frozen=True)
class Case:
    kind: str
    response: str
    truth: str


def ground_truths(rng: random.Random, count: int) -> list[tuple[str, float | None]]:
    """(LaTeX answer, value) pairs in the forms geo3k uses; value None for symbolic answers."""
    out: list[tuple[str, float | None]] = []
    for index in range(count):
        form = rng.random()
        if index % 64 == 63:
            out.append(("x^2+2x+1", None))
        elif form < 0.35:
            value = rng.randint(2, 180)
            out.append((str(value), float(value)))
        elif form < 0.55:
            value = round(rng.uniform(1, 200), 1)
            out.append((f"{value}", value))
        elif form < 0.75:
            num, den = rng.randint(1, 60), rng.choice([3, 7, 9, 11, 13])
            out.append((f"\\frac {{ {num} }} {{ {den} }}", num / den))
        elif form < 0.92:
            coefficient, radicand = rng.randint(2, 12), rng.choice([2, 3, 5, 6, 7, 10, 13, 221])
            out.append((f"{coefficient} \\sqrt {{ {radicand} }}", coefficient * radicand**0.5))
        else:
            coefficient = rng.randint(2, 30)
            out.append((f"{coefficient} \\pi", coefficient * 3.141592653589793))
    return out


def reasoning(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def alternative_form(rng: random.Random, truth: str, value: float | None) -> str:
    if value is None:
        return "(x+1)^2"
    if value.is_integer():
        return rng.choice(
            [f"x = {int(value)}", f"{int(value)}^{{\\circ}}", f"{int(value)}.0", f"\\text{{{int(value)}}}"]
        )
    if "frac" in truth:
        return rng.choice([f"{value:.10f}", truth.replace("\\frac", "\\dfrac").replace(" ", "")])
    return f"{value:.9f}"


def response_for(rng: random.Random, kind: str, truth: str, value: float | None) -> str:
    think = f"<think>{reasoning(rng, rng.randint(40, 250))}</think>"
    if kind == "correct":
        return f"{think} The answer is \\boxed{{{truth}}}."
    if kind == "correct-other-form":
        return f"{think} So \\boxed{{{alternative_form(rng, truth, value)}}}"
    if kind == "wrong":
        wrong = (value or 1.0) * rng.choice([0.5, 2, 1.5]) + rng.randint(1, 9)
        return f"{think} \\boxed{{{wrong:g}}}"
    if kind == "malformed":
        return rng.choice(
            [
                f"{reasoning(rng, 60)} \\boxed{{{truth}}}",
                f"{think} the answer is {truth}",
                f"{think} \\boxed{{\\frac{{1}}{{2}}",
                f"<think>{reasoning(rng, 80)} </think> </think> \\boxed{{}} }}}} {{{{",
                f"\\boxed{{{truth}}}<think>",
            ]
        )
    if kind == "long":
        body = reasoning(rng, rng.randint(1500, 4000))
        return rng.choice([f"<think>{body}</think>\\boxed{{{truth}}}", f"<think>{body}"])
    if kind == "garbage":
        return (
            "".join(chr(rng.randint(0, 0x2FFFF)) for _ in range(rng.randint(1, 3000)))
            .encode("utf-8", "replace")
            .decode("utf-8", "replace")
        )
    if kind == "symbolic":
        return f"{think} \\boxed{{{rng.choice(['(x+1)^2', 'x^2+2x+1', '(1+x)(x+1)', 'x^2+2x+2', 'x^2 + 2 x + 1'])}}}"
    raise ValueError(kind)


KINDS = (
    ("correct", 0.30),
    ("correct-other-form", 0.15),
    ("wrong", 0.25),
    ("malformed", 0.10),
    ("long", 0.12),
    ("garbage", 0.08),
)
ADVERSARIAL = Case(
    "sympy-hard",
    "<think>expand it</think>\\boxed{((x+y)(x-y))^{900}}",
    "(x^2-y^2)^{900}",
)


def make_cases(prompts: int, n: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    cases: list[Case] = []
    for truth, value in ground_truths(rng, prompts):
        for _ in range(n):
            if value is None:
                kind = "symbolic"
            else:
                kind = rng.choices([k for k, _ in KINDS], weights=[w for _, w in KINDS])[0]
            cases.append(Case(kind, response_for(rng, kind, truth, value), truth))
    for position in (len(cases) // 3, 2 * len(cases) // 3):  # two adversarial answers per step
        cases[position] = ADVERSARIAL
    return cases


def clear_caches() -> None:
    """Each path starts cold: ground truths repeat 5 times per prompt, answers do not carry over."""
    normalize.cache_clear()
    parse.cache_clear()
    numeric_verdict.cache_clear()


def timed(case: Case, options: dict[str, Any]) -> tuple[float, dict[str, float]]:
    started = time.perf_counter()
    result = geo3k.compute_score(DATA_SOURCE, case.response, case.truth, {"split": "train"}, **options)
    return time.perf_counter() - started, result


def summarize(
    name: str, total: float, timed_results: list[tuple[float, dict[str, float]]] | None, cases: list[Case]
) -> dict[str, Any]:
    summary: dict[str, Any] = {"path": name, "total_s": round(total, 3), "answers": len(cases)}
    if timed_results:
        latencies = [latency for latency, _ in timed_results]
        bounded = [latency for latency, result in timed_results if result["timeout"]]
        summary["answers_at_the_bound"] = len(bounded)
        summary["seconds_in_answers_at_the_bound"] = round(sum(bounded), 3)
        slowest_by_kind: dict[str, float] = {}
        for case, latency in zip(cases, latencies, strict=True):
            slowest_by_kind[case.kind] = max(slowest_by_kind.get(case.kind, 0.0), latency)
        summary["max_ms_by_kind"] = {
            kind: round(value * 1000, 3) for kind, value in sorted(slowest_by_kind.items())
        }
        ordered = sorted(latencies)
        slowest = max(range(len(latencies)), key=latencies.__getitem__)
        summary |= {
            "p50_ms": round(statistics.median(ordered) * 1000, 3),
            "p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))] * 1000, 3),
            "max_s": round(ordered[-1], 3),
            "slowest": {"kind": cases[slowest].kind, "response": cases[slowest].response[:80]},
        }
    return summary


def run(args: argparse.Namespace) -> dict[str, Any]:
    cases = make_cases(args.prompts, args.n, args.seed)
    options = {"timeout_s": args.timeout_s}
    started = time.perf_counter()
    ready = default_pool().warm_up(timeout_s=60)
    warm_up_s = time.perf_counter() - started

    clear_caches()
    sequential = [timed(case, options) for case in cases]
    sequential_total = sum(latency for latency, _ in sequential)

    clear_caches()
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.threads) as executor:
        threaded = list(executor.map(lambda case: timed(case, options), cases))
    threaded_total = time.perf_counter() - started

    clear_caches()
    started = time.perf_counter()
    batch = geo3k.compute_score_batch(
        [DATA_SOURCE] * len(cases),
        [case.response for case in cases],
        [case.truth for case in cases],
        [{"split": "train"}] * len(cases),
        **options,
    )
    batch_total = time.perf_counter() - started

    by_kind: dict[str, dict[str, float]] = {}
    for case, (_, result) in zip(cases, sequential, strict=True):
        entry = by_kind.setdefault(case.kind, {"count": 0, "acc": 0.0, "format": 0.0, "timeout": 0.0})
        entry["count"] += 1
        for key in ("acc", "format", "timeout"):
            entry[key] += result[key]
    differing = [
        {"kind": case.kind, "sequential": s, "threaded": t, "batch": b}
        for case, (_, s), (_, t), b in zip(cases, sequential, threaded, batch, strict=True)
        if not s == t == b
    ]
    paths = [
        summarize("per-sample (sequential)", sequential_total, sequential, cases),
        summarize(f"per-sample ({args.threads} threads)", threaded_total, threaded, cases),
        summarize("batch (one call)", batch_total, None, cases),
    ]
    worst = max(max(t for t, _ in sequential), max(t for t, _ in threaded))
    return {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_average": os.getloadavg(),
        },
        "timeout_s": args.timeout_s,
        "sympy_warm_up_s": round(warm_up_s, 3),
        "sympy_ready": ready,
        "sympy_timeouts": {"soft": default_pool().soft_timeouts, "hard": default_pool().hard_timeouts},
        "paths": paths,
        "by_kind": by_kind,
        "differing_scores": differing,
        "targets": {
            "under_10s": all(p["total_s"] < 10 for p in paths),
            "no_answer_over_bound": worst <= args.timeout_s,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("--n", type=int, default=5, help="responses per prompt")
    parser.add_argument(
        "--timeout-s", type=float, default=2.0, help="the per-answer bound (reward kwarg timeout_s)"
    )
    parser.add_argument("--threads", type=int, default=min(32, (os.cpu_count() or 1) + 4))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    report = run(args)
    text = json.dumps(report, indent=2, ensure_ascii=False)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if all(report["targets"].values()) and not report["differing_scores"] else 1


if __name__ == "__main__":
    sys.exit(main())
