"""The plugin's version as the installed distribution says it (`kubectl grpo --version`), and
which of its extras (kubectl/pyproject.toml) brings a library a command is missing."""

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


# The first module each extra brings, as an ImportError names it.
_EXTRAS = {
    "matplotlib": "plot",
    "celpy": "validate",
    **dict.fromkeys(("pyarrow", "PIL", "sympy", "hydra", "huggingface_hub", "mathruler", "tqdm"), "plan"),
}


def extra_for(module: str | None) -> str | None:
    """The grpo-kubectl extra that installs `module` (None: not one of ours: a real bug)."""
    return _EXTRAS.get((module or "").split(".")[0])
