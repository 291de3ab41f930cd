"""A GRPOJob file as people write it: its bytes to the one GRPOJob document in it, or one line
that says why not.

Every tool that takes a job file reads it here (`grpo-train --spec`, `kubectl grpo validate|plan
-f`, `GRPOClient.submit`), so a file is refused the same way wherever it is given: text that is
not UTF-8 (with the offset of the first bad byte), YAML that does not parse (with its line and
column, on one line), an empty file, a file of several GRPOJobs. A file may hold other objects
beside its GRPOJob (an example with its reward ConfigMap). JSON is read as JSON first, so the
operator's resolved job (`spec/job.json`) keeps JSON's own error messages.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from .v1alpha1 import KIND


class DocumentError(ValueError):
    """A file that holds no single readable document to act on; the message names the file."""


def decode(data: bytes, source: str) -> str:
    """The file's text; a byte-order mark is dropped, as YAML and JSON readers expect."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise DocumentError(
            f"{source} is not UTF-8 text (byte 0x{data[error.start]:02x} at offset {error.start}): "
            "save it as UTF-8"
        ) from error


def yaml_message(error: yaml.YAMLError) -> str:
    """PyYAML's error on one line: where, what, and while doing what (no copy of the source)."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None)
    context = getattr(error, "context", None)
    if problem is None:
        return " ".join(str(error).split())
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return f"{where}{problem}" + (f" ({context})" if context else "")


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping: PyYAML keeps the last one
    silently (a second `algorithm:` block would drop the first), and kubectl refuses the file."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if isinstance(key, str) and key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} is given twice in one mapping", key_node.start_mark
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[arg-type]


def job_document(text: str, source: str) -> Any:
    """The GRPOJob of a file that may hold several documents, else its only document.

    JSON first, then YAML, which reads most JSON too (and what kubectl takes in a `.json` file);
    a `.json` file that neither reads is shown JSON's error.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        json_error = error
    try:
        documents = [d for d in yaml.load_all(text, Loader=_UniqueKeyLoader) if d is not None]
    except yaml.YAMLError as error:
        if source.endswith(".json"):
            raise DocumentError(f"{source} is not valid JSON: {json_error}") from json_error
        raise DocumentError(f"{source} is not valid YAML: {yaml_message(error)}") from error
    jobs = [d for d in documents if isinstance(d, dict) and d.get("kind") == KIND]
    if len(jobs) == 1:
        return jobs[0]
    if len(jobs) > 1:
        raise DocumentError(f"{source} holds {len(jobs)} GRPOJobs: give a file with one")
    if not documents:
        raise DocumentError(f"{source} is empty: it holds no GRPOJob")
    if len(documents) == 1:
        return documents[0]
    raise DocumentError(f"{source} holds {len(documents)} documents and none is a GRPOJob (kind: {KIND})")


def grpojob_manifest(data: bytes, source: str) -> dict[str, Any]:
    """The GRPOJob manifest of a file's bytes; DocumentError names the file and what is wrong."""
    document = job_document(decode(data, source), source)
    if not isinstance(document, dict):
        raise DocumentError(f"{source} holds a {_json_type(document)}, not a GRPOJob (kind: {KIND})")
    kind = document.get("kind")
    if kind != KIND:
        found = f"a {kind}" if isinstance(kind, str) and kind else "no kind"
        raise DocumentError(f"{source} holds {found}, not a GRPOJob (kind: {KIND})")
    return document


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__
