"""A job file's bytes to its one GRPOJob, or one line that names the file and what is wrong with it:
the same reading for `grpo-train --spec`, `kubectl grpo validate|plan -f` and `GRPOClient.submit`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from grpo_kubectl.cli import main as kubectl_grpo
from grpo_operator.api.documents import DocumentError, grpojob_manifest, job_document
from grpo_trainer.cli import main as grpo_train
from grpo_trainer.failures import CONFIG_ERROR
from support.trainer_inputs import example_job
from support.verdict_cases import BASE

JOB = yaml.safe_dump(BASE, sort_keys=False)
CONFIG_MAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: reward}\ndata: {reward.py: ''}\n"

# name, file contents, the one line expected (after the file's name)
BAD_FILES = [
    (
        "latin1.yaml",
        JOB.replace("verdict", "verdict # caf\xe9").encode("latin-1"),
        "is not UTF-8 text (byte 0xe9 at offset",
    ),
    (
        "flow.yaml",
        b"kind: GRPOJob\nspec: [1, 2\nmetadata: {}\n",
        "is not valid YAML: line 3, column 9: expected ',' or ']'",
    ),
    (
        "tabs.yaml",
        b"kind: GRPOJob\nspec:\n\tmodel: {}\n",
        "is not valid YAML: line 3, column 1: found character '\\t'",
    ),
    ("empty.yaml", b"", "is empty: it holds no GRPOJob"),
    ("comments.yaml", b"# nothing yet\n---\n", "is empty: it holds no GRPOJob"),
    ("two.yaml", f"{JOB}---\n{JOB}".encode(), "holds 2 GRPOJobs: give a file with one"),
    ("others.yaml", f"{CONFIG_MAP}---\n{CONFIG_MAP}".encode(), "holds 2 documents and none is a GRPOJob"),
    ("list.yaml", b"- kind: GRPOJob\n", "holds a list, not a GRPOJob (kind: GRPOJob)"),
    ("pod.yaml", b"kind: Pod\n", "holds a Pod, not a GRPOJob (kind: GRPOJob)"),
    ("nokind.yaml", b"metadata: {name: x}\nspec: {}\n", "holds no kind, not a GRPOJob (kind: GRPOJob)"),
    (
        "twice.yaml",
        (JOB + "metadata: {name: other}\n").encode(),
        "is not valid YAML: line 19, column 1: key 'metadata' is given twice in one mapping",
    ),
    ("cut.json", json.dumps(BASE)[:40].encode(), "is not valid JSON: "),
]


@pytest.mark.parametrize(("name", "data", "expected"), BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_a_bad_file_is_one_line_naming_it(name: str, data: bytes, expected: str):
    with pytest.raises(DocumentError) as refused:
        grpojob_manifest(data, name)
    message = str(refused.value)
    assert message.startswith(f"{name} {expected}"), message
    assert "\n" not in message


@pytest.mark.parametrize(("name", "data", "expected"), BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_grpo_train_and_the_plugin_refuse_it_in_one_line(name, data, expected, tmp_path, capsys, monkeypatch):
    path = tmp_path / name
    path.write_bytes(data)
    assert grpo_train(["plan", "--spec", str(path)]) == CONFIG_ERROR
    err = capsys.readouterr().err.strip()
    kinds = ("list.yaml", "pod.yaml", "nokind.yaml")
    # grpo-train also reads the resolved job the operator writes, so a file of another kind says so.
    if name in kinds:
        assert "is neither a GRPOJob (kind: GRPOJob) nor the resolved job the operator writes" in err
    else:
        assert err.startswith(f"error: the job spec {path} {expected}"), err
    assert len(err.splitlines()) == 1
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    assert kubectl_grpo(["validate", "--offline", "-f", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {path} {expected}"), err
    assert len(err.splitlines()) == 1


def test_the_grpojob_beside_its_config_map_is_the_one_read():
    data = f"{CONFIG_MAP}---\n{JOB}".encode()
    assert grpojob_manifest(data, "job.yaml") == BASE


def test_a_byte_order_mark_and_yaml_in_a_json_file_are_read_as_kubectl_reads_them():
    assert grpojob_manifest(b"\xef\xbb\xbf" + JOB.encode(), "job.yaml") == BASE
    assert grpojob_manifest(JOB.encode(), "job.json") == BASE
    assert job_document(json.dumps(BASE), "job.json") == BASE


def test_the_resolved_job_the_operator_writes_is_still_read(tmp_path, capsys):
    job = example_job("colours-cpu")
    path = tmp_path / "job.json"
    path.write_text(job.model_dump_json(by_alias=True))
    assert grpo_train(["plan", "--spec", str(path)]) == 0
    assert "error" not in capsys.readouterr().err


def test_the_examples_read_as_before():
    for example in sorted((Path(__file__).resolve().parents[3] / "examples").glob("*.yaml")):
        manifest = grpojob_manifest(example.read_bytes(), example.name)
        assert manifest["kind"] == "GRPOJob"
