"""`stacks`: the timeline of a start-up's sampled stacks, read back from a `wait`'s archive."""

from __future__ import annotations

import re
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .attempts import folder_name

SAMPLE_HEAD = re.compile(r"^=== \[\s*([\d.]+)s\] pid (\d+) (.*)$", re.M)
FRAME = re.compile(r"^\s+(\S+) \((.+):\d+\)$")
SITE_PREFIXES = re.compile(r"^.*?/(site|dist)-packages/")


@dataclass(frozen=True)
class StackSample:
    seconds: float
    pid: int
    title: str
    busy: tuple[tuple[tuple[str, str], ...], ...]
    """The frames (function, file) of each thread py-spy saw busy, innermost first."""


def stack_samples(text: str) -> list[StackSample]:
    """The samples of a `stacks.log`, in order."""
    heads = list(SAMPLE_HEAD.finditer(text))
    samples = []
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        body = text[head.end() : after.start() if after else len(text)]
        busy = []
        for thread in re.split(r"^Thread ", body, flags=re.M)[1:]:
            first, _, frames = thread.partition("\n")
            if "(idle)" in first:
                continue
            found = (FRAME.match(line) for line in frames.splitlines())
            busy.append(tuple((m[1], SITE_PREFIXES.sub("", m[2])) for m in found if m))
        samples.append(StackSample(float(head[1]), int(head[2]), head[3].strip(), tuple(busy)))
    return samples


def activity(sample: StackSample) -> str:
    """What a sample's process was doing, in a few words: idle, Python compiling source on import,
    importing, or its innermost verl or vLLM frame (else its innermost frame)."""
    if not sample.busy:
        return "idle"
    frames = sample.busy[0]
    functions = {function for function, _ in frames}
    if "SourceLoader.source_to_code" in functions:
        return "importing: compiling source"
    if "_find_and_load" in functions:
        return "importing"
    ours = [f"{function} ({file})" for function, file in frames if file.startswith(("verl/", "vllm/"))]
    if ours:
        return ours[0]
    return f"{frames[0][0]} ({frames[0][1]})" if frames else "busy"


def stacks_report(text: str) -> list[str]:
    """A timeline of a sampled start-up: each process's runs of one activity (idle ones left out),
    then how many busy samples there were and how many of them compiled source."""
    spans: dict[int, list[list[Any]]] = {}
    samples = stack_samples(text)
    for sample in samples:
        what = activity(sample)
        runs = spans.setdefault(sample.pid, [])
        if runs and runs[-1][2] == what:
            runs[-1][1] = sample.seconds
            runs[-1][3] += 1
        else:
            runs.append([sample.seconds, sample.seconds, what, 1, sample.title])
    rows = sorted(
        (start, end, pid, title, what, count)
        for pid, runs in spans.items()
        for start, end, what, count, title in runs
        if what != "idle"
    )
    lines = [
        f"{start:7.1f} – {end:7.1f} s  pid {pid:<7} {title[:40]:40}  {what} ({count})"
        for start, end, pid, title, what, count in rows
    ]
    busy = [s for s in samples if s.busy]
    compiling = sum(activity(s) == "importing: compiling source" for s in busy)
    importing = sum(activity(s).startswith("importing") for s in busy)
    lines.append(
        f"{len(samples)} samples, {len(busy)} busy: {importing} importing, {compiling} of them compiling source"
    )
    return lines


def cmd_stacks(archive: Path, attempt: int) -> int:
    """Here: the timeline of an attempt's sampled stacks, from the logs a `wait` call archived."""
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.name.endswith(f"{folder_name(attempt)}/stacks.log"):
                text = tar.extractfile(member).read().decode(errors="replace")  # type: ignore[union-attr]
                print("\n".join(stacks_report(text)))
                return 0
    raise SystemExit(
        f"no {folder_name(attempt)}/stacks.log in {archive}: start the attempt with --sample-stacks"
    )
