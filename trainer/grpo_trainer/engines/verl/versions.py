"""What differs between the verl versions the trainer images carry.

verl renames and retires Hydra keys between minor versions, and a key that moved is not always an
error: `custom_reward_function.path` still composes in 0.9.1 but lands in a legacy slot nothing
reads. So the overrides are written per version family, from a profile checked by composing that
version's own configuration in the tests (`tests/unit/verl_engine/test_compose.py`).

The installed version is read from the package metadata, never by importing `verl` (its
`__init__` pulls in torch and ray).
"""

from __future__ import annotations

import argparse
import importlib.metadata
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from ...failures import ConfigError


@dataclass(frozen=True)
class VerlProfile:
    """The facts about one verl version family that change the overrides we emit."""

    family: str
    """"0.9" or "0.7"."""
    reference_version: str
    """The release whose configuration the tests compose for this family."""
    reward_prefix: str
    """Where the custom reward function is configured."""
    migrates_legacy_reward: bool
    """main_ppo copies the top-level `custom_reward_function`/`reward_model` keys into `reward.*`
    before training (verl 0.7's `migrate_legacy_reward_impl`); 0.9's main_ppo no longer does."""
    checkpoint_callback: bool
    """`trainer.checkpoint_callback_class` exists (a driver-side hook after every save)."""
    policy_loss_modes: frozenset[str]
    """Registered `actor.policy_loss.loss_mode` values we may select."""


PROFILES: dict[str, VerlProfile] = {
    "0.9": VerlProfile(
        family="0.9",
        reference_version="0.9.1",
        reward_prefix="reward.custom_reward_function",
        migrates_legacy_reward=False,
        checkpoint_callback=True,
        policy_loss_modes=frozenset({"vanilla", "gspo"}),
    ),
    "0.7": VerlProfile(
        family="0.7",
        reference_version="0.7.1",
        # The keys the geo3k Ascend recipe's stack was written for; main_ppo migrates them into reward.*.
        reward_prefix="custom_reward_function",
        migrates_legacy_reward=True,
        checkpoint_callback=False,
        policy_loss_modes=frozenset({"vanilla", "gspo"}),
    ),
}
SUPPORTED = tuple(p.reference_version for p in PROFILES.values())


def installed_version() -> str | None:
    """The verl release installed in this environment, from its metadata (no import)."""
    try:
        return importlib.metadata.version("verl")
    except importlib.metadata.PackageNotFoundError:
        return None


def version_argument(text: str) -> str:
    """A verl release as a command line gives it (`--verl-version`): a usage mistake otherwise."""
    try:
        Version(text)
    except InvalidVersion:
        raise argparse.ArgumentTypeError(f"not a verl version: {text!r} (a release such as 0.9.1)") from None
    return text


def profile_for(version: str) -> tuple[VerlProfile, str | None]:
    """The profile for a verl version, and a warning when the version was not tested.

    Versions between the known families use the nearest older family's keys; the trainer still
    composes the installed configuration before launching, so a key that moved is caught then.
    """
    try:
        parsed = Version(version)
    except InvalidVersion as exc:
        raise ConfigError(f"not a verl version: {version!r}") from exc
    if parsed < Version("0.7"):
        raise ConfigError(f"verl {version} is too old: the trainer supports verl {', '.join(SUPPORTED)}")
    family = "0.7" if parsed < Version("0.8") else "0.9"
    profile = PROFILES[family]
    warning = None
    if (parsed.major, parsed.minor) != Version(profile.reference_version).release[:2]:
        warning = f"verl {version} was not tested; using the overrides for verl {profile.reference_version}"
    return profile, warning
