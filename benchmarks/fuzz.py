"""Fuzz run: generated GRPOJob specs through the models, validation, the child builders and the
real API server (server-side dry runs), counting what must never happen.

Each spec is one of the examples with one to four fields changed (hypothesis draws the field from
the CRD's own schema, and the value from that field's pattern, its type's edge values or any text)
or removed, or a changed metadata.name. For each:

1. the Python side: the models parse it (a refusal names its field), then verdict.job_problems:
   the CRD's CEL rules evaluated offline (api/rules.py) and validation.validate() (every problem
   names its field), and the builders make every child without raising;
2. the API server: a server-side dry run of creating the GRPOJob (a refusal names its field);
3. the two must agree: refused by one <=> refused by the other (the operator-only checks, which
   need its settings or a look at the cluster, are told apart);
4. a spec both accept must have children the API server accepts: every child is dry-run created,
   and so is each Ray pod (head, worker) as a Pod, through the API server's pod validation and the
   namespace's `restricted` Pod Security level.

Counted: specs, accepted, refused at admission, refused by the operator only; and the targets,
all 0: tracebacks, refusals that name no field, disagreements, children or pods refused after
admission. Needs a running local cluster (make cluster-up). tests/integration/test_chaos.py runs a
short one with --check (exit 1 unless every target is 0). The recorded run:

    .venv/bin/python -m benchmarks.fuzz --examples 600 --out /tmp/fuzz.json
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from grpo_operator.api.problem import Problem
from grpo_operator.api.v1alpha1 import GRPOJob
from grpo_operator.children.configmap import build_spec_configmap
from grpo_operator.children.networkpolicy import build_network_policy
from grpo_operator.children.pvc import build_checkpoint_pvc
from grpo_operator.children.rayjob import build_rayjob
from grpo_operator.children.rbac import build_trainer_rbac
from grpo_operator.config import load_settings
from grpo_operator.verdict import job_problems
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from lightkube import ApiError, Client, codecs
from lightkube.config.kubeconfig import KubeConfig
from lightkube.resources.core_v1 import Namespace
from pydantic import ValidationError

from .examples import example_document
from .harness import read_env_file
from .paths import CACHE, CRDS, EXAMPLES

SETTINGS = load_settings(environ={})
CRD = yaml.safe_load((CRDS / "grpo.dev_grpojobs.yaml").read_text())
SPEC_SCHEMA = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
# The GRPOJob of each example (colours-cpu.yaml also holds its reward's ConfigMap).
EXAMPLE_JOBS = [example_document(p.stem) for p in sorted(EXAMPLES.glob("*.yaml"))]
DELETE = object()
# What only the operator can check (its settings, or a claim it looks up): no admission rule for these.
OPERATOR_ONLY = (
    ("spec.resources.accelerator", ""),
    ("spec.resources.priorityClassName", "no PriorityClass"),
    ("spec.resources.product", "productLabel"),
    ("spec.engine.name", "verl's rollouts need GPUs"),
    ("spec.checkpoint.claimName", "must be ReadWriteMany"),
)
EDGE_STRINGS = [
    "",
    "a",
    "A" * 300,
    "1.2.3Gi",
    "-1",
    "0",
    "0.0",
    "64Gi",
    "500m",
    "1e3",
    "Inf",
    " 8",
    "8 ",
    "hf://Qwen/Qwen3-VL-4B",
    "hf://a/b/c",
    "hf://a--b/c",
    "modelscope://x/y",
    "pvc://claim/x",
    "pvc://Claim/x",
    "s3://bucket/p",
    "s3://B",
    "/abs/path",
    "relative/path",
    "my queue",
    "key=value",
    "=x",
    "GRPO_ATTEMPT",
    "ünïcødé",
    "a\nb",
    "demo.v2",
    "-x",
    "x-",
    "a" * 64,
    "example.com/key",
    "Example.com/key",
]


def leaves(
    schema: dict[str, Any], path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """Every field of the spec schema, with its schema (objects with properties are walked into)."""
    out = []
    for name, prop in (schema.get("properties") or {}).items():
        here = (*path, name)
        out.append((here, prop))
        if prop.get("type") == "object" and "properties" in prop:
            out += leaves(prop, here)
    return out


FIELDS = leaves(SPEC_SCHEMA)


def values_for(prop: dict[str, Any]) -> st.SearchStrategy[Any]:
    kind = prop.get("type")
    if "enum" in prop:
        return st.one_of(st.sampled_from(prop["enum"]), st.sampled_from(EDGE_STRINGS))
    if kind == "string":
        options = [st.sampled_from(EDGE_STRINGS), st.text(max_size=40)]
        if "pattern" in prop:
            options.append(st.from_regex(prop["pattern"], fullmatch=True).filter(lambda s: len(s) <= 200))
        return st.one_of(*options)
    if kind == "integer":
        return st.one_of(
            st.integers(-5, 300),
            st.sampled_from([0, 1, 2**31 - 1, 2**31, -(2**31), 2**63 - 1, 10**7]),
        )
    if kind == "number":
        return st.one_of(st.floats(-2, 20, allow_nan=False), st.sampled_from([0.0, 1.0, 1e-9, 1e9, -0.5]))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(values_for(prop.get("items") or {"type": "string"}), max_size=3)
    if kind == "object" and "additionalProperties" in prop:
        return st.dictionaries(
            st.sampled_from([*EDGE_STRINGS, "pool", "a/b"]),
            values_for(prop["additionalProperties"]),
            max_size=3,
        )
    if kind == "object":
        return st.fixed_dictionaries(
            {}, optional={k: values_for(v) for k, v in (prop.get("properties") or {}).items()}
        )
    return st.sampled_from(EDGE_STRINGS)


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    body = copy.deepcopy(draw(st.sampled_from(EXAMPLE_JOBS)))
    body["metadata"] = {"name": draw(st.sampled_from(["fuzz", "fuzz-2"]))}
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.integers(0, 9)) == 0:
            body["metadata"]["name"] = draw(
                st.one_of(
                    st.sampled_from(["1demo", "demo.v2", "Demo", "a" * 41, "a" * 40, "-a", "ok-name"]),
                    st.from_regex(r"[a-z][-a-z0-9]{0,45}", fullmatch=True),
                )
            )
            continue
        path, prop = draw(st.sampled_from(FIELDS))
        value = draw(st.one_of(st.just(DELETE), values_for(prop)))
        node = body["spec"]
        for part in path[:-1]:
            node = (
                node.setdefault(part, {})
                if isinstance(node.get(part), dict) or part not in node
                else node[part]
            )
            if not isinstance(node, dict):
                break
        else:
            if value is DELETE:
                node.pop(path[-1], None)
            else:
                node[path[-1]] = value
    return body


class Run:
    def __init__(self, client: Client, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = {}

    def note(self, target: str, detail: str) -> None:
        self.counts[target] += 1
        self.examples.setdefault(target, [])
        if len(self.examples[target]) < 5:
            self.examples[target].append(detail[:1500])

    def priority_class_exists(self, name: str) -> bool:
        """What the operator looks up before it creates anything."""
        from lightkube.resources.scheduling_v1 import PriorityClass

        try:
            self.client.get(PriorityClass, name)
        except ApiError as error:
            if error.status.code == 404:
                return False
            raise
        return True

    def dry_run(self, body: dict[str, Any]) -> list[tuple[str, str]] | None:
        """None when the API server accepts creating `body`; else its (field, message) causes."""
        try:
            self.client.create(codecs.from_dict(body), namespace=self.namespace, dry_run=True)
        except ApiError as error:
            causes = (error.status.details.causes if error.status.details else None) or []
            named = [(c.field or "", c.message or "") for c in causes if c.field and c.field != "<nil>"]
            return named or [("", error.status.message or "")]
        return None

    def check(self, body: dict[str, Any]) -> None:
        self.counts["specs"] += 1
        spec_text = json.dumps(body, default=str)[:1200]
        body = json.loads(json.dumps(body, default=str))  # what kubectl would send
        server = self.dry_run(body)
        if server is not None and any(not field.startswith(("spec", "metadata.name")) for field, _ in server):
            self.note("refusals_naming_no_field", f"{server} for {spec_text}")
        python_refused, operator_only = self.python(body, spec_text)
        if python_refused is None:
            return  # a traceback, already counted
        server_refused = server is not None
        if server_refused != python_refused:
            self.note(
                "disagreements",
                f"API server {server or 'accepts'} / Python {'refuses' if python_refused else 'accepts'}: {spec_text}",
            )
            return
        if server_refused:
            self.counts["refused_at_admission"] += 1
        elif operator_only:
            self.counts["refused_by_the_operator_only"] += 1
        else:
            self.counts["accepted"] += 1
            self.children(body, spec_text)

    def python(self, body: dict[str, Any], spec_text: str) -> tuple[bool | None, bool]:
        """(refused, refused only for operator-only reasons); refused None on a traceback."""
        try:
            job = GRPOJob.model_validate(
                {**body, "metadata": {**body["metadata"], "namespace": self.namespace, "uid": "fuzz-uid"}}
            )
        except ValidationError as error:
            if any(not e["loc"] for e in error.errors()):
                self.note("refusals_naming_no_field", f"{error.errors()} for {spec_text}")
            return True, False
        except Exception:
            self.note("tracebacks", f"{traceback.format_exc()} for {spec_text}")
            return None, False
        priority = job.spec.resources.priority_class_name
        try:
            # What every judge but the API server says together (verdict.py): the CRD's CEL rules
            # evaluated here, then the operator's validate().
            problems: list[Problem] = job_problems(
                job,
                SETTINGS,
                priority_class_exists=self.priority_class_exists(priority) if priority else None,
            )
        except Exception:
            self.note("tracebacks", f"{traceback.format_exc()} for {spec_text}")
            return None, False
        if any(not p.field.startswith(("spec.", "metadata.")) for p in problems):
            self.note("refusals_naming_no_field", f"{problems} for {spec_text}")
        mirrored = [p for p in problems if not any(p.field == f and m in p.message for f, m in OPERATOR_ONLY)]
        if problems and not mirrored:
            return False, True
        if mirrored:
            return True, False
        try:
            self.built = [
                build_rayjob(job, SETTINGS, 1),
                build_spec_configmap(job, SETTINGS),
                *build_trainer_rbac(job),
                *[c for c in (build_checkpoint_pvc(job, SETTINGS), build_network_policy(job, SETTINGS)) if c],
            ]
        except Exception:
            self.note("tracebacks", f"{traceback.format_exc()} for {spec_text}")
            return None, False
        return False, False

    def children(self, body: dict[str, Any], spec_text: str) -> None:
        rayjob = self.built[0]
        pods = []
        cluster = rayjob["spec"]["rayClusterSpec"]
        for role, template in [("head", cluster["headGroupSpec"]["template"])] + [
            ("worker", g["template"]) for g in cluster["workerGroupSpecs"]
        ]:
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"fuzz-{role}", "labels": template["metadata"]["labels"]},
                    "spec": template["spec"],
                }
            )
        # A pod is admitted only with its service account there: make the trainer's for real.
        account = next(c for c in self.built if c["kind"] == "ServiceAccount")
        try:
            self.client.create(
                codecs.from_dict(
                    {
                        **account,
                        "metadata": {
                            **account["metadata"],
                            "namespace": self.namespace,
                            "ownerReferences": [],
                        },
                    }
                )
            )
        except ApiError as error:
            if error.status.code != 409:
                raise
        for child in [c for c in self.built if c is not account] + pods:
            child = {**child, "metadata": {**child["metadata"], "namespace": self.namespace}}
            refused = self.dry_run(child)
            if refused is not None:
                self.note("children_refused_after_admission", f"{child['kind']} {refused} for {spec_text}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=600)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--check", action="store_true", help="exit 1 unless every target is 0")
    args = parser.parse_args()
    env = read_env_file(Path(os.environ.get("GRPO_CLUSTER_DIR", CACHE / "cluster")) / "cluster.env")
    client = Client(KubeConfig.from_file(env["KUBECONFIG"]), field_manager="grpo-fuzz")
    client.apply(codecs.from_dict(CRD), force=True)
    namespace = f"fuzz-{int(time.time())}"
    labels = {"pod-security.kubernetes.io/enforce": "restricted", "grpo.dev/fuzz": "true"}
    client.create(Namespace(metadata={"name": namespace, "labels": labels}))
    run = Run(client, namespace)
    started = time.monotonic()

    @seed(args.seed)
    @settings(
        max_examples=args.examples, database=None, deadline=None, suppress_health_check=list(HealthCheck)
    )
    @given(specs())
    def one(body: dict[str, Any]) -> None:
        run.check(body)

    one()
    client.delete(Namespace, namespace)
    targets = ("tracebacks", "refusals_naming_no_field", "disagreements", "children_refused_after_admission")
    result = {
        "specs": run.counts["specs"],
        "accepted": run.counts["accepted"],
        "refused_at_admission": run.counts["refused_at_admission"],
        "refused_by_the_operator_only": run.counts["refused_by_the_operator_only"],
        **{target: run.counts[target] for target in targets},
        "seconds": round(time.monotonic() - started, 1),
        "examples": run.examples,
        "machine": f"{os.cpu_count()} CPUs",
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 1 if args.check and any(result[t] for t in targets) else 0


if __name__ == "__main__":
    raise SystemExit(main())
