"""What a remote backbone's ``extra`` table may hold: provider options, handed to ``dspy.LM`` as written, only.

A typed field set through ``extra`` would dodge its validation, a credential there would sit in the file, and
``dspy.LM``'s own construction arguments are not provider options: `RemoteBackbone` (`backbones.config`) refuses each,
naming the field (`NOT_PROVIDER_OPTIONS`; `credential_key` finds a credential at any depth).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["EXTRA_CREDENTIALS", "NOT_PROVIDER_OPTIONS", "credential_key"]

# `extra` is for provider options only. A typed field set through it would dodge its validation; a credential there
# would sit in the file; dspy.LM's own construction arguments are not provider options.
EXTRA_CREDENTIALS: Final = frozenset(
    {"api_key", "key", "token", "access_token", "authorization", "headers", "extra_headers", "azure_ad_token"}
)
NOT_PROVIDER_OPTIONS: Final = frozenset(
    {
        "base_url",
        "messages",
        "prompt",
        "model_type",
        "callbacks",
        "provider",
        "engine",
        "async_engine",
        "launch_kwargs",
        "train_kwargs",
        "finetuning_model",
        "prompt_cache",
        "stream",
    }
)


def credential_key(options: Mapping[str, Any], where: str) -> str | None:
    """The dotted path of the first key in ``options`` (at any depth) that names a credential, or None."""
    for name, value in sorted(options.items()):
        if name.lower() in EXTRA_CREDENTIALS:
            return f"{where}.{name}"
        if isinstance(value, Mapping) and (found := credential_key(value, f"{where}.{name}")) is not None:
            return found
    return None
