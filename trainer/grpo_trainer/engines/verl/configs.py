"""verl's Hydra configuration files, without verl: from the installed package or a fetched wheel.

Composing verl's config needs only its YAML files and hydra-core. In the trainer image they come
with the installed package; on a CPU machine (CI, a laptop) the first `grpo-train validate` of a
release downloads its wheel (about 1-2 MB, no dependencies) and extracts `verl/trainer/config/**`
into the user's cache, `$XDG_CACHE_HOME/grpo-operator/verl-configs` (by default
`~/.cache/grpo-operator/verl-configs`; `$GRPO_VERL_CONFIG_CACHE` moves it), wherever it is run
from. Fetching ahead of time (an offline machine later):

    python -m grpo_trainer.engines.verl.configs fetch --version 0.9.1 --version 0.7.1
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from ...failures import ConfigError
from .versions import SUPPORTED, installed_version

CONFIG_SUBDIR = Path("verl/trainer/config")
CACHE_ENV = "GRPO_VERL_CONFIG_CACHE"


def cache_root() -> Path:
    """The per-user cache (never relative to the current folder)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).absolute()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "grpo-operator" / "verl-configs"


def installed_config_dir() -> Path | None:
    """The installed verl's config folder, found without importing verl (find_spec runs no code)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "trainer" / "config"
    return folder if (folder / "ppo_trainer.yaml").is_file() else None


def config_dir(version: str, cache: Path | None = None, *, download: bool = True) -> Path:
    """Where the configuration of verl `version` is: installed (when it is that version), cached,
    or fetched into the cache now (`download`)."""
    if installed_version() == version:
        folder = installed_config_dir()
        if folder is not None:
            return folder
    folder = (cache or cache_root()) / version / CONFIG_SUBDIR
    if (folder / "ppo_trainer.yaml").is_file():
        return folder
    if download:
        print(
            f"fetching verl {version}'s configuration (its 1-2 MB wheel) into {cache or cache_root()}",
            file=sys.stderr,
            flush=True,
        )
        try:
            return fetch(version, cache)
        except (OSError, subprocess.CalledProcessError, StopIteration) as exc:
            raise ConfigError(
                f"verl {version}'s configuration is not here and could not be fetched ({_why(exc)}); "
                "pass --config-dir with verl's trainer/config folder"
            ) from exc
    raise ConfigError(
        f"verl {version}'s configuration is neither installed nor fetched; run "
        f"`python -m grpo_trainer.engines.verl.configs fetch --version {version}`"
    )


def _why(error: BaseException) -> str:
    """pip's own reason (its last ERROR line) rather than the command that failed."""
    if isinstance(error, subprocess.CalledProcessError):
        lines = [line for line in (error.stderr or "").splitlines() if line.startswith("ERROR:")]
        return "pip: " + (
            lines[-1].removeprefix("ERROR:").strip() if lines else f"exit status {error.returncode}"
        )
    if isinstance(error, StopIteration):
        return "pip downloaded no wheel"
    return " ".join(str(error).split())


def fetch(version: str, cache: Path | None = None) -> Path:
    """Download verl's wheel and extract its config folder, once; returns the config folder."""
    root = cache or cache_root()
    final = root / version
    folder = final / CONFIG_SUBDIR
    if (folder / "ppo_trainer.yaml").is_file():
        return folder
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=f".fetch-{version}-") as tmp:
        wheels = Path(tmp) / "wheel"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                f"verl=={version}",
                "--dest",
                str(wheels),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        wheel = next(wheels.glob("verl-*.whl"))
        staging = Path(tmp) / "extract"
        prefix = CONFIG_SUBDIR.as_posix() + "/"
        with zipfile.ZipFile(wheel) as archive:
            members = [m for m in archive.namelist() if m.startswith(prefix)]
            archive.extractall(staging, members)
        (staging / "WHEEL").write_text(wheel.name + "\n", encoding="utf-8")
        try:
            staging.rename(final)
        except OSError:
            # Another process fetched the same version first; its copy is as good as ours.
            if not (folder / "ppo_trainer.yaml").is_file():
                shutil.rmtree(final, ignore_errors=True)
                staging.rename(final)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grpo_trainer.engines.verl.configs")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("fetch", "path"):
        cmd = sub.add_parser(name)
        cmd.add_argument("--version", action="append", help=f"verl release (default: {', '.join(SUPPORTED)})")
        cmd.add_argument(
            "--cache",
            type=Path,
            default=None,
            help=f"cache folder (default ${CACHE_ENV}, else ~/.cache/grpo-operator/verl-configs)",
        )
    args = parser.parse_args(argv)
    for version in args.version or SUPPORTED:
        if args.command == "fetch":
            folder = fetch(version, args.cache)
        else:
            folder = config_dir(version, args.cache, download=False)
        print(f"{version}\t{folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
