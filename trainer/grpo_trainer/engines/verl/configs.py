"""verl's Hydra configuration files, without verl: from the installed package or a fetched wheel.

Composing verl's config needs only its YAML files and hydra-core. In the trainer image they come
with the installed package; on a CPU machine (CI, a laptop) `fetch` downloads the release's wheel
(about 1-2 MB, no dependencies) and extracts `verl/trainer/config/**` into a git-ignored cache:

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
DEFAULT_CACHE = Path(".cache/verl-configs")
CACHE_ENV = "GRPO_VERL_CONFIG_CACHE"


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE).absolute()


def installed_config_dir() -> Path | None:
    """The installed verl's config folder, found without importing verl (find_spec runs no code)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "trainer" / "config"
    return folder if (folder / "ppo_trainer.yaml").is_file() else None


def config_dir(version: str, cache: Path | None = None) -> Path:
    """Where the configuration of verl `version` is: installed (when it is that version) or fetched."""
    if installed_version() == version:
        folder = installed_config_dir()
        if folder is not None:
            return folder
    folder = (cache or cache_root()) / version / CONFIG_SUBDIR
    if (folder / "ppo_trainer.yaml").is_file():
        return folder
    raise ConfigError(
        f"verl {version}'s configuration is neither installed nor fetched; run "
        f"`python -m grpo_trainer.engines.verl.configs fetch --version {version}`"
    )


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
            "--cache", type=Path, default=None, help=f"cache folder (default ${CACHE_ENV} or .cache)"
        )
    args = parser.parse_args(argv)
    for version in args.version or SUPPORTED:
        folder = fetch(version, args.cache) if args.command == "fetch" else config_dir(version, args.cache)
        print(f"{version}\t{folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
