"""Training curves from a job's status history: what a person sees in the terminal and as a PNG."""

from __future__ import annotations

import json
from pathlib import Path

from grpo_kubectl.drawing import Curve, curves, main, terminal_chart, write_png
from grpo_operator.api.v1alpha1 import GRPOJobStatus
from grpo_operator.api.v1alpha1.status import History, history_points

HISTORY = [
    {"step": 2, "reward": 0.5, "responseLength": 12.0},
    {"step": 1, "reward": 0.25, "responseLength": 10.0, "valScore": 0.1},
    {"step": 3, "reward": 1.0, "responseLength": float("nan")},
]


def test_series_are_in_step_order_and_skip_what_is_missing_or_not_finite() -> None:
    found = {c.name: c for c in curves(HISTORY)}
    assert found["reward"] == Curve("reward", [1, 2, 3], [0.25, 0.5, 1.0])
    assert found["validation score"] == Curve("validation score", [1], [0.1])
    assert found["response length"].steps == [1, 2]


def test_the_terminal_chart_puts_the_lowest_point_at_the_bottom_and_the_highest_at_the_top() -> None:
    chart = terminal_chart(Curve("reward", [1, 2, 3], [0.0, 0.5, 1.0]), height=5).splitlines()
    assert chart[0].startswith("       1 |")
    assert chart[0].endswith("*")
    assert chart[4].startswith("       0 |*")
    assert chart[-1].strip() == "step 1 .. 3   reward: last 1, mean of the last 3 0.5"


def test_a_constant_series_is_said_in_words() -> None:
    assert terminal_chart(Curve("response length", [1, 9], [1.0, 1.0])) == (
        "response length: 1 at every step (1 .. 9)"
    )


def test_the_png_is_written(tmp_path: Path) -> None:
    path = write_png(curves(HISTORY), tmp_path / "curves.png", "job")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_command_reads_a_grpojob_and_says_when_there_is_nothing_yet(tmp_path: Path, capsys) -> None:
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"metadata": {"name": "j"}, "status": {}}))
    assert main([str(job)]) == 0
    assert capsys.readouterr().out.strip() == "j: no training history in its status yet"
    job.write_text(json.dumps({"metadata": {"name": "j"}, "status": {"history": HISTORY}}))
    assert main([str(job), "--png", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").is_file()


def test_a_file_that_is_not_a_job_is_one_line(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main([str(bad)]) == 2
    assert capsys.readouterr().err.startswith("error: cannot read a GRPOJob as JSON")


def test_the_status_columns_read_back_as_points_and_a_column_that_does_not_line_up_is_dropped() -> None:
    points = [
        {"step": 10, "reward": 0.123456, "response_length": 1024.4},
        {"step": 20, "reward": -0.5, "val_score": 0.25, "response_length": 1.5e-5},
    ]
    wire = History.of(points).to_wire()
    assert wire == {
        "steps": "10 20",
        "reward": "0.1235 -0.5",
        "valScore": "_ 0.25",
        "responseLength": "1024 1.5e-05",
    }
    GRPOJobStatus.model_validate({"history": wire})  # within the schema's pattern and bounds
    assert history_points({"history": wire}) == [
        {"step": 10, "reward": 0.1235, "responseLength": 1024.0},
        {"step": 20, "reward": -0.5, "valScore": 0.25, "responseLength": 1.5e-05},
    ]
    # A column of another length (a patch from an older trainer, a hand edit) is not plotted wrongly.
    assert history_points({"history": {**wire, "reward": "0.1"}}) == [
        {"step": 10, "responseLength": 1024.0},
        {"step": 20, "valScore": 0.25, "responseLength": 1.5e-05},
    ]
    assert history_points({"history": {"steps": "1 x"}}) == []
    assert history_points({}) == []
    assert history_points({"history": HISTORY}) == HISTORY  # the list form of earlier releases
