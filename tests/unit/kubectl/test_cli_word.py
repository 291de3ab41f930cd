"""`kubectl grpo` keeps its word: each command offers only what it takes, completes from its own
argparse tree, and its small messages read right (validate's summary, plan's folder of an
existing job, a deleted job's `--claim`, a sub-second step, a stale operator Lease).

The API server is a stand-in for the one or two calls each case makes (methods of `Cluster`);
the same paths against the real API server are in tests/integration/test_client_traps.py.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from grpo_kubectl import completion
from grpo_kubectl.cli import build_parser, main
from grpo_kubectl.cluster import Cluster, JobNotFoundError
from grpo_kubectl.show import describe
from grpo_operator.api.contract import job_dir
from lightkube import ApiError, Client
from lightkube.core.generic_client import GenericSyncClient
from lightkube.resources.coordination_v1 import Lease

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "lora-single-gpu.yaml"
UNREACHABLE = (
    "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
    "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
    "users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\n"
)
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.fixture
def kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    path = tmp_path / "config"
    path.write_text(UNREACHABLE)
    monkeypatch.setenv("KUBECONFIG", str(path))
    return str(path)


def _commands() -> dict[str, argparse.ArgumentParser]:
    return completion.commands(build_parser())


# --- what each command offers -------------------------------------------------------------------


def test_each_commands_help_offers_only_the_flags_it_takes():
    """`-A` and `-o wide` were in every command's help, and `status -o wide` was rc 2."""
    helps = {name: cmd.format_help() for name, cmd in _commands().items()}
    assert "--all-namespaces" in helps["list"]
    assert "wide" in helps["list"]
    for name, text in helps.items():
        if name != "list":
            assert "--all-namespaces" not in text, name
            assert "wide" not in text, name
    for name in ("logs", "checkpoints", "suspend", "resume", "dashboard", "validate", "completion"):
        assert "--output" not in helps[name], name
    assert "{json,yaml}" in helps["status"]


def test_an_output_a_command_has_not_is_refused_as_not_offered(capsys, kubeconfig):
    assert main(["status", "x", "-o", "wide"]) == 2
    assert "invalid choice: 'wide' (choose from 'json', 'yaml')" in capsys.readouterr().err
    assert main(["logs", "x", "-o", "yaml"]) == 2
    assert capsys.readouterr().err == (
        "error: unrecognized arguments: -o yaml (see kubectl grpo logs --help)\n"
    )


def test_every_positional_argument_has_help():
    for name, cmd in _commands().items():
        for action in cmd._positionals._group_actions:
            assert action.help, f"{name} {action.dest}"


# --- completion ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("words", "expected", "directive"),
    [
        (["st"], ["status"], completion.NO_FILES),
        (["status", "x", "-o", ""], ["json", "yaml"], completion.NO_FILES),
        (["list", "-o", "w"], ["wide"], completion.NO_FILES),
        (["completion", ""], ["bash", "zsh"], completion.NO_FILES),
        (["validate", "-f", ""], [], completion.DEFAULT),  # a file name: the shell's own
        (["-n", "team-a", "sus"], ["suspend"], completion.NO_FILES),
    ],
)
def test_completion_answers_from_the_parser(words, expected, directive):
    found, said = completion.candidates(build_parser(), words)
    assert [line.split("\t")[0] for line in found] == expected
    assert said == directive


def test_completion_offers_a_commands_own_flags_only():
    found, _ = completion.candidates(build_parser(), ["status", "--"])
    flags = [line.split("\t")[0] for line in found]
    assert "--output" in flags
    assert "--all-namespaces" not in flags
    assert "--png" not in flags


def test_kubectls_plugin_completion_finds_an_executable_of_this_distribution():
    """kubectl 1.26+ runs `kubectl_complete-grpo` from PATH for `kubectl grpo <TAB>`."""
    scripts = tomllib.loads((REPO / "kubectl" / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["kubectl_complete-grpo"].split(":")
    assert (module, function) == ("grpo_kubectl.cli", "complete")


def test_the_bash_script_completes_through_kubectl_complete_grpo(tmp_path, capsys):
    assert main(["completion", "bash"]) == 0
    script = tmp_path / "completion.bash"
    script.write_text(capsys.readouterr().out)
    shim = tmp_path / "bin" / "kubectl_complete-grpo"
    shim.parent.mkdir()
    shim.write_text(
        f"#!/bin/sh\nexec {sys.executable} -c "
        "'import sys; from grpo_kubectl.cli import complete; sys.exit(complete())' \"$@\"\n"
    )
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    done = subprocess.run(
        [
            "bash",
            "-c",
            f"source {script}; COMP_WORDS=(kubectl-grpo status x -o ''); COMP_CWORD=4; "
            '_kubectl_grpo; echo "${COMPREPLY[@]}"',
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert done.stdout.split() == ["json", "yaml"]


def test_the_zsh_script_is_a_compdef():
    assert completion.script("zsh").startswith("#compdef kubectl-grpo\n")
    assert "kubectl_complete-grpo" in completion.script("zsh")


# --- messages -----------------------------------------------------------------------------------


def test_validates_summary_is_a_sentence(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    manifest = yaml.safe_load(EXAMPLE.read_text())
    manifest["spec"]["algorithm"]["learningRat"] = 1e-5
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(manifest))
    assert main(["validate", "-f", str(path), "--offline"]) == 3
    assert capsys.readouterr().err == (
        "1 problem(s); checked offline: the CRD's schema and CEL rules or the operator's checks refuse it\n"
    )
    assert main(["validate", "-f", str(EXAMPLE), "--offline"]) == 0
    assert capsys.readouterr().out == (
        "ok: checked offline: it passes the CRD's schema and CEL rules and the operator's checks\n"
    )


def _stored(uid: str = "0123456789abcdef") -> dict[str, Any]:
    body = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"].update(namespace="team-a", uid=uid)
    return body


def test_plan_of_an_existing_job_shows_its_folder_with_its_uid(capsys, kubeconfig, monkeypatch):
    body = _stored()
    monkeypatch.setattr(Cluster, "job_body", lambda self, name: body)
    assert main(["plan", body["metadata"]["name"]]) == 0
    folder = job_dir(body["metadata"]["name"], body["metadata"]["uid"])
    assert folder.endswith(f"/{body['metadata']['name']}-01234567")
    assert f'"{folder}/checkpoints"' in capsys.readouterr().out


def test_kubectl_plan_of_an_existing_job_plans_with_what_it_measured(capsys, kubeconfig, monkeypatch):
    body = _stored()
    body["status"] = {
        "phase": "Running",
        "checkpoint": {"saveSeconds": 5.0, "latestStep": 3},
        "metrics": {"stepSeconds": 2.0, "reward": 0.5},
    }
    monkeypatch.setattr(Cluster, "job_body", lambda self, name: body)
    assert main(["plan", body["metadata"]["name"], "-o", "json"]) == 0
    stop = json.loads(capsys.readouterr().out)["saveOnStop"]
    assert stop["save"]["seconds"] == 2 * 5 + 30
    assert stop["step"]["seconds"] == 3


@pytest.mark.parametrize("command", ["logs", "checkpoints", "plot"])
def test_a_deleted_job_is_said_to_be_readable_with_claim(command, capsys, kubeconfig, monkeypatch):
    def gone(self: Cluster, name: str) -> dict[str, Any]:
        raise JobNotFoundError(f'grpojob "{name}" not found in namespace "{self.namespace}"')

    monkeypatch.setattr(Cluster, "job_body", gone)
    assert main([command, "old-run", "-n", "team-a"]) == 1
    assert capsys.readouterr().err == (
        'error: grpojob "old-run" not found in namespace "team-a"; if it was deleted and its claim '
        "kept, --claim old-run-checkpoints (or the claim its spec named) reads its files\n"
    )


def test_a_sub_second_step_is_not_zero_seconds():
    body = {
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {},
        "status": {"phase": "Running", "metrics": {"reward": 0.5, "stepSeconds": 0.62}},
    }
    assert "  step 0.6s  " in describe(body)


# --- the operator's Lease -----------------------------------------------------------------------


def _lease(renewed: datetime, holder: str | None = "grpo-operator-7d9f") -> Lease:
    return Lease.from_dict(
        {
            "metadata": {"name": "grpo-operator", "namespace": "grpo-system"},
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": 15,
                "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            },
        }
    )


def _serving(monkeypatch: pytest.MonkeyPatch, cluster: Cluster, answer: Any) -> list[tuple[str, str]]:
    asked: list[tuple[str, str]] = []

    def get(resource: Any, name: str, *, namespace: str) -> Any:
        asked.append((namespace, name))
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(cluster.client, "get", get)
    return asked


def _api_error(code: int) -> ApiError:
    import httpx2 as httpx

    response = httpx.Response(code, json={"kind": "Status", "code": code, "message": "no"})
    response.request = httpx.Request("GET", "https://127.0.0.1:1/")
    return ApiError(response=response)


def test_a_stale_operator_lease_is_said(kubeconfig, monkeypatch):
    cluster = Cluster(kubeconfig, None, "team-a")
    asked = _serving(monkeypatch, cluster, _lease(NOW - timedelta(minutes=42)))
    assert cluster.no_operator(NOW) == (
        "no operator is running (its Lease grpo-system/grpo-operator was last renewed 42 min ago)"
    )
    assert asked == [("grpo-system", "grpo-operator")]
    _serving(monkeypatch, cluster, _lease(NOW - timedelta(seconds=3), holder=None))  # released
    assert cluster.no_operator(NOW) == (
        "no operator is running (its Lease grpo-system/grpo-operator was last renewed 3 s ago)"
    )


@pytest.mark.parametrize(
    "answer",
    [_lease(NOW - timedelta(seconds=5)), _api_error(403), _api_error(404)],
    ids=["fresh", "forbidden", "absent"],
)
def test_a_fresh_unreadable_or_absent_lease_says_nothing(answer, kubeconfig, monkeypatch):
    cluster = Cluster(kubeconfig, None, "team-a")
    _serving(monkeypatch, cluster, answer)
    assert cluster.no_operator(NOW) is None


def test_another_lease_is_named_by_the_environment(kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECTL_GRPO_OPERATOR_LEASE", "ops/grpo")
    cluster = Cluster(kubeconfig, None, "team-a")
    asked = _serving(monkeypatch, cluster, _lease(NOW - timedelta(hours=2)))
    assert "120 min ago" in (cluster.no_operator(NOW) or "")
    assert asked == [("ops", "grpo")]


@pytest.mark.parametrize("argv", [["status", "j"], ["list"], ["list", "-o", "json"]])
def test_status_and_list_tell_of_a_stale_operator(argv, capsys, kubeconfig, monkeypatch):
    body = _stored()
    body["metadata"]["name"] = "j"
    monkeypatch.setattr(Cluster, "job_body", lambda self, name: body)
    monkeypatch.setattr(Cluster, "list_jobs", lambda self, all_namespaces=False: [body])
    monkeypatch.setattr(Cluster, "no_operator", lambda self: "no operator is running (...)")
    assert main(argv) == 0
    assert capsys.readouterr().err == "note: no operator is running (...)\n"


# --- the strict dry run -------------------------------------------------------------------------


def test_the_strict_dry_runs_call_is_what_lightkube_offers():
    """Cluster.dry_run calls lightkube's generic client for `fieldValidation=Strict` (its public
    create has no such parameter): the call's parameters must still be there."""
    assert {"method", "res", "obj", "namespace", "params"} <= set(
        inspect.signature(GenericSyncClient.request).parameters
    )
    # When lightkube's public create takes it, the dry run should use that instead.
    assert not {"field_validation", "params"} & set(inspect.signature(Client.create).parameters)
