"""hack/check_docs.py, the docs check in `make lint`: it fails on what it exists to catch."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _load_checker():
    spec = importlib.util.spec_from_file_location("check_docs", REPO / "hack" / "check_docs.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


check_docs = _load_checker()


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def _run(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = check_docs.main([str(root)])
    return code, capsys.readouterr().out.splitlines()


GOOD = {
    "README.md": "# Tool\n\nSee [the guide](docs/guide.md#first-steps) and [examples](examples/).\n",
    "docs/guide.md": "# Guide\n\n## First steps\n\nBack to the [README](../README.md).\n",
    "examples/job.yaml": "kind: GRPOJob\n",
    "charts/tool/README.md": "# Chart\n\n[values](values.yaml), [site](https://example.com/x.md)\n",
    "charts/tool/values.yaml": "{}\n",
}


def test_a_tree_whose_links_resolve_passes(tmp_path, capsys) -> None:
    code, lines = _run(_tree(tmp_path, GOOD), capsys)
    assert (code, lines) == (0, [])


def test_a_broken_link_fails_naming_the_file_and_line(tmp_path, capsys) -> None:
    files = dict(GOOD, **{"docs/guide.md": "# Guide\n\n## First steps\n\nSee [install](install.md).\n"})
    code, lines = _run(_tree(tmp_path, files), capsys)
    assert code == 1
    assert lines == ["docs/guide.md:5: broken link: install.md (install.md does not exist)"]


def test_a_broken_link_in_the_chart_readme_fails(tmp_path, capsys) -> None:
    files = dict(GOOD, **{"charts/tool/README.md": "# Chart\n\n[schema](values.schema.json)\n"})
    code, lines = _run(_tree(tmp_path, files), capsys)
    assert code == 1
    assert lines == [
        "charts/tool/README.md:3: broken link: values.schema.json (values.schema.json does not exist)"
    ]


def test_an_anchor_must_name_a_heading_of_the_page(tmp_path, capsys) -> None:
    files = dict(GOOD)
    files["README.md"] = "# Tool\n\n[a](docs/guide.md#first-step) [b](#tool) [c](#missing)\n"
    code, lines = _run(_tree(tmp_path, files), capsys)
    assert code == 1
    assert lines == [
        "README.md:3: broken link: docs/guide.md#first-step (no heading #first-step there)",
        "README.md:3: broken link: #missing (no heading #missing there)",
    ]


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("1. Build and push the images", "1-build-and-push-the-images"),
        ("`kubectl grpo`", "kubectl-grpo"),
        ("Queues: Kueue", "queues-kueue"),
        (
            "Exit codes (`grpo_operator.api.contract`, shared with the operator)",
            "exit-codes-grpo_operatorapicontract-shared-with-the-operator",
        ),
        ("The operator–trainer contract", "the-operatortrainer-contract"),
    ],
)
def test_anchors_follow_githubs_slugs(heading: str, slug: str) -> None:
    assert slug in check_docs.anchors(f"## {heading}\n")


def test_repeated_headings_are_numbered() -> None:
    assert check_docs.anchors("## Images\n## Images\n") == {"images", "images-1"}


def test_links_in_code_are_not_links(tmp_path, capsys) -> None:
    files = dict(GOOD)
    files["docs/guide.md"] = "# Guide\n\n## First steps\n\n`[x](nowhere.md)`\n\n```\n[y](nowhere.md)\n```\n"
    code, lines = _run(_tree(tmp_path, files), capsys)
    assert (code, lines) == (0, [])


def test_an_over_long_readme_fails(tmp_path, capsys) -> None:
    words = " ".join(["word"] * (check_docs.README_MAX_WORDS + 1))
    files = dict(GOOD, **{"README.md": f"# Tool\n\n{words}\n"})
    code, lines = _run(_tree(tmp_path, files), capsys)
    assert code == 1
    assert lines == [
        f"README.md:1: {check_docs.README_MAX_WORDS + 3} words, over the README's {check_docs.README_MAX_WORDS}"
    ]


def test_a_readme_at_the_limit_passes(tmp_path, capsys) -> None:
    words = " ".join(["word"] * (check_docs.README_MAX_WORDS - 2))
    files = dict(GOOD, **{"README.md": f"# Tool\n\n{words}\n"})
    assert _run(_tree(tmp_path, files), capsys) == (0, [])


@pytest.mark.parametrize(
    "sentence",
    [
        "Measured in the twenty-ninth session.",
        "Sessions of work.",
        "Rerun in the thirtieth run.",
        "On a rented H200.",
        "The rental ran out.",
        "A lent machine.",
        "We leased an H100.",
        "It spent 42 GPU-minutes.",
        "The device minutes ledger.",
    ],
)
def test_a_refused_word_fails_in_docs(tmp_path, capsys, sentence: str) -> None:
    files = dict(GOOD, **{"docs/bench.md": f"# Bench\n\n{sentence}\n"})
    code, lines = _run(_tree(tmp_path, files), capsys)
    assert code == 1
    assert len(lines) >= 1
    assert all(line.startswith("docs/bench.md:3: refused word: ") for line in lines)


def test_a_refused_word_fails_in_the_readme(tmp_path, capsys) -> None:
    files = dict(GOOD)
    files["README.md"] = GOOD["README.md"] + "\nThe eleventh session made this.\n"
    code, lines = _run(_tree(tmp_path, files), capsys)
    assert code == 1
    assert lines == ["README.md:5: refused word: eleventh", "README.md:5: refused word: session"]


def test_a_rental_name_fails_even_in_code(tmp_path, capsys) -> None:
    files = dict(GOOD, **{"docs/bench.md": "# Bench\n\n`comparison_512_lease3` and\n\n```\nlease 2\n```\n"})
    code, lines = _run(_tree(tmp_path, files), capsys)
    assert code == 1
    assert lines == ["docs/bench.md:3: refused word: lease3", "docs/bench.md:6: refused word: lease 2"]


@pytest.mark.parametrize(
    "sentence",
    [
        "The leader holds a Lease in the release namespace.",
        "`settings.leaseDurationSeconds` (15 s): how long a Lease lasts.",
        "The first, second and third attempts; the tenth step.",
        "The reporter starts through `Session.start_reporting`.",
        "The current rendering of the parent.",
        "Silent, relentless, talent.",
    ],
)
def test_product_words_pass(tmp_path, capsys, sentence: str) -> None:
    files = dict(GOOD, **{"docs/ops.md": f"# Ops\n\n{sentence}\n"})
    assert _run(_tree(tmp_path, files), capsys) == (0, [])


def test_words_are_checked_in_docs_and_the_readme_only(tmp_path, capsys) -> None:
    files = dict(
        GOOD, **{"charts/tool/README.md": "# Chart\n\nNo session here.\n", "hack/README.md": "A session.\n"}
    )
    assert _run(_tree(tmp_path, files), capsys) == (0, [])


def test_the_repositorys_own_readme_is_within_its_budget() -> None:
    path = REPO / "README.md"
    assert list(check_docs.check_readme_length(path, path.read_text())) == []
