"""The config a verb's request names (`-c` and `--set`, or a loaded config), for every verb alike."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from clearmed.core.errors import UsageError

if TYPE_CHECKING:
    from clearmed.config import ClearmedConfig

__all__ = ["ConfigChoice", "packaged_config_paths", "request_config"]


class ConfigChoice(Protocol):
    """The config options of any verb's request (`-c` and `--set`)."""

    config: ClearmedConfig | str | Path | None
    overrides: list[str]


def request_config(request: ConfigChoice) -> ClearmedConfig:
    """The config the request (of any verb) names, with its overrides (a loaded config takes none)."""
    from clearmed.config import ClearmedConfig, load_config

    if not isinstance(request.config, ClearmedConfig):
        return load_config(str(request.config) if request.config else None, overrides=request.overrides)
    if request.overrides:
        raise UsageError("overrides (--set) apply to a config name or TOML path, not to a loaded config")
    return request.config


def packaged_config_paths() -> dict[str, Path]:
    """The packaged configs a request can name (`clearmed config --list`): name -> its TOML file."""
    from clearmed.config import packaged_configs

    return packaged_configs()
