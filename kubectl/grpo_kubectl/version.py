"""The plugin's version, as the installed distribution says it (`kubectl grpo --version`)."""

from __future__ import annotations

from importlib import metadata

# The slim CLI distribution first; in a checkout with the whole project installed, the project's.
DISTRIBUTIONS = ("grpo-kubectl", "grpo-operator")


def plugin_version() -> str:
    for name in DISTRIBUTIONS:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "unknown (not installed: run from a source tree)"
