"""Training curves from a job's status history: what a person sees in the terminal and as a PNG."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from grpo_kubectl.drawing import (
    Curve,
    curves,
    figure,
    headline,
    main,
    moving_average,
    terminal_chart,
    write_png,
)
from grpo_kubectl.history import history_from_metrics
from grpo_operator.api.v1alpha1 import GRPOJobStatus
from grpo_operator.api.v1alpha1.status import History, history_points

HISTORY = [
    {"step": 2, "reward": 0.5, "responseLength": 12.0},
    {"step": 1, "reward": 0.25, "responseLength": 10.0, "valScore": 0.1},
    {"step": 3, "reward": 1.0, "responseLength": float("nan")},
]


def test_series_are_in_step_order_and_skip_what_is_missing_or_not_finite() -> None:
    found = {c.name: c for c in curves(HISTORY)}
    assert found["reward"] == Curve("reward", [1, 2, 3], [0.25, 0.5, 1.0], "mean per response")
    assert found["validation score"] == Curve("validation score", [1], [0.1], "mean accuracy")
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


# --- the picture a person would rather look at -----------------------------------------------

FIXTURE = Path(__file__).parent / "fixtures" / "colours-attempt-1.jsonl"
"""60 steps of a colour-job-like run (tests/unit/kubectl/fixtures): the reward climbs from the
chance of 0.25, the response length is always 16 tokens (the job's maxResponseLength), entropy
falls and KL grows; validation every 10 steps."""


def _fixture() -> list[Curve]:
    return curves(history_from_metrics(FIXTURE.read_text().splitlines()))


def test_entropy_and_kl_come_from_the_metrics_files_with_their_units() -> None:
    found = {c.name: c for c in _fixture()}
    assert list(found) == ["reward", "validation score", "response length", "entropy", "KL"]
    assert found["entropy"].label == "entropy (nats per token)"
    assert found["KL"].label == "KL (nats per token)"
    assert found["response length"].label == "response length (tokens)"
    assert len(found["entropy"].steps) == 60


def test_the_png_draws_what_moves_and_says_the_flat_series_in_words() -> None:
    """The old PNG spent a third of its height on a flat response-length line, drew the reward
    without a moving average or baseline, and had neither entropy nor KL."""
    import matplotlib.pyplot as plt

    drawn = figure(_fixture(), "team-a/colours-cpu", baseline=0.25)
    try:
        axes = drawn.get_axes()
        assert [a.get_ylabel() for a in axes] == [
            "reward (mean per response)",
            "validation score (mean accuracy)",
            "entropy (nats per token)",
            "KL (nats per token)",
        ]
        assert axes[-1].get_xlabel() == "step (training steps)"
        legend = [t.get_text() for t in axes[0].get_legend().get_texts()]
        assert legend == ["each step", "mean of 6 steps", "baseline 0.25"]
        assert [t.get_text() for t in drawn.texts] == [
            "team-a/colours-cpu\nreward, mean of the last 10 steps: 0.825",  # the title
            "response length: 16 tokens at every step (1 .. 60)",
        ]
    finally:
        plt.close(drawn)


def test_the_moving_average_and_the_headline() -> None:
    assert moving_average([0.0, 1.0, 2.0, 3.0], 2) == [0.0, 0.5, 1.5, 2.5]
    reward = Curve("reward", list(range(1, 13)), [0.0, 0.0] + [1.0] * 10)
    assert headline([reward]) == "reward, mean of the last 10 steps: 1"
    assert headline([Curve("KL", [1], [0.1])]) == ""


def test_the_terminal_reward_chart_has_its_average_and_baseline() -> None:
    reward = next(c for c in _fixture() if c.name == "reward")
    chart = terminal_chart(reward, smooth=True, baseline=0.25).splitlines()
    assert chart[-1].strip() == "* each step   - mean of 6 steps   . baseline 0.25"
    assert sum(row.count("-") for row in chart[:-3]) > 30  # the average's own marks
    assert any(row.count(".") > 30 for row in chart[:-3])  # the baseline's row
    assert "reward (mean per response): last 0.781, mean of the last 10 0.825" in chart[-2]


@pytest.mark.parametrize("baseline", [0.0, 2.0])
def test_a_baseline_outside_the_points_is_still_on_the_chart(baseline: float) -> None:
    chart = terminal_chart(
        Curve("reward", [1, 2, 3], [0.5, 0.7, 0.9]), height=5, baseline=baseline, smooth=True
    )
    assert any(set(row.split("|", 1)[1]) <= {".", "*", "-"} and "." in row for row in chart.splitlines()[:5])


def test_the_plot_command_draws_the_fixture_with_a_baseline(tmp_path: Path, capsys, monkeypatch) -> None:
    from grpo_kubectl.cli import main as kubectl_grpo

    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    png = tmp_path / "c.png"
    assert (
        kubectl_grpo(["plot", "--metrics-file", str(FIXTURE), "--png", str(png), "--baseline", "0.25"]) == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("colours-attempt-1.jsonl: reward, mean of the last 10 steps: 0.825\n")
    assert "response length: 16 tokens at every step (1 .. 60)" in out
    assert "entropy (nats per token)" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
