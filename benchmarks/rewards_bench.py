"""Reward throughput, and the time bound per answer when verl's threads compete.

    .venv/bin/python -m benchmarks.rewards_bench [--reward geo3k|geo3k-lenient] [--prompts 512] [--n 5]
                                                 [--timeout-s 2.0] [--json out.json]
    .venv/bin/python -m benchmarks.rewards_bench --time-bound [--threads 8] [--calls 400] [--json out.json]

Throughput (the default): responses are generated (seeded) to look like a Qwen-VL rollout on
geo3k: correct answers in the ground truth's form and in other forms (decimal for a fraction,
`x = `, degrees, `\\dfrac`), wrong answers, malformed ones (no `<think>`, no box, unclosed box),
long ones (up to ~24k characters, some cut off before the box), garbage (random unicode), symbolic
answers that need sympy, and a couple of adversarial ones that sympy cannot settle in time (they
must stop at the bound). Three paths are timed after the worker pool is warm (its one-time start
is reported apart):
- per-sample, sequential: `compute_score` once per response (what verl's naive manager calls);
- per-sample, threaded: the same from a thread pool, as verl's `run_in_executor(None, ...)` does;
- batch: one `compute_score_batch` call over all responses.
Targets: under 10 s for the 2,560 and no single answer over `--timeout-s`.

Time bound (`--time-bound`): `--threads` threads (verl's executor) call each reward at
once, a quarter of the calls with an answer that cannot be graded in time (or, for the custom
reward, a function that never returns) and the rest ordinary, so the calls at the bound compete
with busy threads for the two cores and the interpreter lock. Every call's wall time is measured
from the call to its return; the target is that none exceeds the reward's bound.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
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

from grpo_trainer.rewards import custom, geo3k, geo3k_lenient, safety
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


SCORERS = {"geo3k": geo3k, "geo3k-lenient": geo3k_lenient}


def timed(case: Case, options: dict[str, Any]) -> tuple[float, dict[str, float]]:
    scorer = SCORERS[options.get("reward", "geo3k")]
    kwargs = {k: v for k, v in options.items() if k != "reward"}
    started = time.perf_counter()
    result = scorer.compute_score(DATA_SOURCE, case.response, case.truth, {"split": "train"}, **kwargs)
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
    options = {"timeout_s": args.timeout_s, "reward": args.reward}
    scorer = SCORERS[args.reward]
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
    batch = scorer.compute_score_batch(
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
            entry[key] += result["correct" if key == "acc" and "correct" in result else key]
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
        "machine": machine(),
        "reward": args.reward,
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


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": os.getloadavg(),
    }


HANGING_REWARD = """
import time

def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    if solution_str == "hang":
        while True:  # busy, in the worker process: only killing it ends this
            pass
    total = 0
    for i in range(20000):  # an ordinary reward's work
        total += i
    return float(solution_str == ground_truth)
"""


def bound_workloads(tmp: Path, calls: int) -> list[tuple[str, float, Any, list[tuple[str, str, Any]]]]:
    """(reward, bound, per-sample function, [(response, truth, extra_info)]) with a quarter at the bound."""
    reward_file = tmp / "reward.py"
    reward_file.write_text(HANGING_REWARD)
    hard = ADVERSARIAL
    mathruler_hard = ("<think>.</think>\\boxed{((x+y)*(x-y))**900}", "(x**2-y**2)**900")
    rng = random.Random(1)

    def mix(
        at_bound: tuple[str, str, Any], ordinary: list[tuple[str, str, Any]]
    ) -> list[tuple[str, str, Any]]:
        return [at_bound if i % 4 == 0 else rng.choice(ordinary) for i in range(calls)]

    geo_ordinary = [
        (response_for(rng, kind, truth, value), truth, None)
        for truth, value in ground_truths(rng, 40)
        if value is not None
        for kind in ("correct", "wrong", "long", "correct-other-form")
    ]
    safety_ordinary = [
        ("<think>.</think> I can't help with that.", "unsafe", None),
        ("<think>.</think> The answer is \\boxed{12}.", '{"safety_label": "safe", "answer": "12"}', None),
    ]
    # As many workers as competing threads: a call waiting for a busy worker would wait into its
    # own bound (reported as "calls_at_the_bound" beyond the quarter sent there).
    options = {"timeout_s": 2.0, "sympy_workers": 8}
    return [
        (
            "geo3k",
            2.0,
            functools.partial(geo3k.compute_score, **options),
            mix((*mathruler_hard, None), geo_ordinary),
        ),
        (
            "geo3k-lenient",
            2.0,
            functools.partial(geo3k_lenient.compute_score, **options),
            mix((hard.response, hard.truth, None), geo_ordinary),
        ),
        (
            "safety",
            2.0,
            functools.partial(safety.compute_score, **options),
            mix(
                (
                    f"<think>.</think> {hard.response.split('</think>')[1]}",
                    json.dumps({"answer": hard.truth}),
                    None,
                ),
                safety_ordinary,
            ),
        ),
        (
            "custom",
            2.0,
            functools.partial(
                custom.compute_score, custom_path=str(reward_file), custom_timeout_s=2.0, custom_workers=8
            ),
            mix(("hang", "x", None), [("a", "a", None), ("b", "a", None)]),
        ),
    ]


def time_bound(args: argparse.Namespace) -> dict[str, Any]:
    import tempfile

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, bound, function, calls in bound_workloads(Path(tmp), args.calls):
            function(DATA_SOURCE, "warm", "up", None)  # worker pools up: their start is not a call's time

            def one(call: tuple[str, str, Any], function: Any = function) -> tuple[float, Any]:
                started = time.perf_counter()
                result = function(DATA_SOURCE, call[0], call[1], call[2])
                return time.perf_counter() - started, result

            started = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(max_workers=args.threads) as executor:
                timed_calls = list(executor.map(one, calls))
            wall = time.perf_counter() - started
            latencies = sorted(latency for latency, _ in timed_calls)
            at_bound = sum(1 for _, r in timed_calls if isinstance(r, dict) and r.get("timeout")) or sum(
                1 for (response, _, _) in calls if response == "hang"
            )
            results.append(
                {
                    "reward": name,
                    "bound_s": bound,
                    "calls": len(calls),
                    "calls_at_the_bound": at_bound,
                    "wall_s": round(wall, 2),
                    "p50_ms": round(statistics.median(latencies) * 1000, 2),
                    "p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))] * 1000, 1),
                    "max_s": round(latencies[-1], 4),
                    "over_the_bound": sum(1 for latency in latencies if latency > bound),
                }
            )
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    return {
        "machine": machine(),
        "threads": args.threads,
        "results": results,
        "targets": {"no_call_over_its_bound": all(r["over_the_bound"] == 0 for r in results)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reward", choices=sorted(SCORERS), default="geo3k")
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("--n", type=int, default=5, help="responses per prompt")
    parser.add_argument(
        "--timeout-s", type=float, default=2.0, help="the per-answer bound (reward kwarg timeout_s)"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="default: verl's pool, or 8 with --time-bound"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--time-bound", action="store_true", help="the bound per call under competing threads"
    )
    parser.add_argument("--calls", type=int, default=400, help="calls per reward with --time-bound")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if args.threads is None:
        args.threads = 8 if args.time_bound else min(32, (os.cpu_count() or 1) + 4)
    if args.time_bound:
        report = time_bound(args)
        ok = all(report["targets"].values())
    else:
        report = run(args)
        ok = all(report["targets"].values()) and not report["differing_scores"]
    text = json.dumps(report, indent=2, ensure_ascii=False)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
