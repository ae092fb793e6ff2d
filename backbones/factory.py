"""`build_lm`: a validated `BackboneConfig` -> a ready `dspy.LM` (a `ClearmedLM`: `backbones.client`).

The only place that reads API keys (from the environment variable the config names) and the only place
that decides how each kind of backbone is reached. Nothing here touches the network at build time.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import dspy

from clearmed.backbones.client import ClearmedLM
from clearmed.backbones.config import AnyBackbone, EmbeddedBackbone, RemoteBackbone
from clearmed.backbones.embedded import AsyncLlamaCppEngine, LlamaCppEngine
from clearmed.backbones.errors import ConfigError, join_location
from clearmed.backbones.failures import install_error_shapes
from clearmed.backbones.llama_runtime import (
    EMBEDDED_EXTRA_MESSAGE,
    LlamaLoader,
    llama_cpp_available,
    load_llama,
)
from clearmed.backbones.model_files import ModelFileError, resolve_model_path
from clearmed.backbones.selfcheck import ensure_engine_works

__all__ = ["build_lm", "lm_label"]

# A served model behind an OpenAI-compatible server usually ignores the key; the client still wants one.
_PLACEHOLDER_KEY = "none"


def build_lm(
    cfg: AnyBackbone,
    *,
    role: str = "main",
    source: str = "",
    llama_loader: LlamaLoader | None = None,
) -> dspy.LM:
    """Build the DSPy LM for one backbone; a problem raises a one-line `ConfigError`.

    ``role`` and ``source`` (the config file) label error messages; ``role`` also names the backbone in a fatal
    error's line. Building any LM also installs the error shapes DSPy's native client would misread
    (`backbones.failures.install_error_shapes`); the LM retries by clearmed's policy itself (`backbones.client`).
    Provider options (``reasoning_effort``, ``extra``) go to ``dspy.LM`` as keyword arguments. ``llama_loader``
    replaces the real llama.cpp loader for an embedded backbone (tests inject a fake model through it).
    """
    # LiteLLM (DSPy's fallback backend) otherwise fetches its cost map from GitHub on first use.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    install_error_shapes()
    where = _Where(source, role)
    common: dict[str, Any] = {
        "temperature": cfg.temperature,
        "max_tokens": cfg.output_budget,
        "cache": cfg.cache,
        "num_retries": cfg.num_retries,
        "service": f"{role} backbone {cfg.dspy_model}"
        + (f" at {cfg.api_base}" if isinstance(cfg, RemoteBackbone) and cfg.api_base else ""),
        "min_output_tokens": cfg.min_output_tokens,
        "backbone": cfg,
    }
    if cfg.top_p is not None:
        common["top_p"] = cfg.top_p
    if cfg.kind == "embedded":
        return _embedded_lm(cfg, common, where, llama_loader)
    remote: dict[str, Any] = copy.deepcopy(cfg.extra)  # the LM may keep and change what it is given
    if cfg.reasoning_effort is not None:
        remote["reasoning_effort"] = cfg.reasoning_effort
    if cfg.timeout is not None:
        remote["timeout"] = cfg.timeout
    if cfg.api_base is not None:
        remote["api_base"] = cfg.api_base
    key = _api_key(cfg, where)
    if cfg.kind == "openai_compatible":
        remote["api_key"] = key or _PLACEHOLDER_KEY
    elif key is not None:
        remote["api_key"] = key
    try:
        return ClearmedLM(cfg.dspy_model, **common, **remote)
    except (ValueError, dspy.LMConfigurationError) as exc:
        raise ConfigError(where.at("model", _without_secrets(str(exc), key))) from None


def lm_label(lm: dspy.BaseLM) -> str:
    """The model name recorded in provenance and usage records (DSPy keys usage by it too)."""
    return str(lm.model)


class _Where:
    """Formats ``<file>: backbones.<role>.<field>: <message>``."""

    def __init__(self, source: str, role: str) -> None:
        self.source = source
        self.role = role

    def at(self, field: str, message: str) -> str:
        location = join_location("backbones", self.role, field)
        return f"{self.source}: {location}: {message}" if self.source else f"{location}: {message}"


def _api_key(cfg: RemoteBackbone, where: _Where) -> str | None:
    """The key from the named environment variable; errors name the variable, never a value."""
    if cfg.api_key_env is None:
        return None
    value = os.environ.get(cfg.api_key_env, "").strip()
    if not value:
        raise ConfigError(where.at("api_key_env", f"environment variable {cfg.api_key_env} is not set or empty"))
    return value


def _without_secrets(message: str, key: str | None) -> str:
    return message.replace(key, "***") if key else message


def _embedded_lm(
    cfg: EmbeddedBackbone, common: dict[str, Any], where: _Where, llama_loader: LlamaLoader | None
) -> dspy.LM:
    if llama_loader is None:
        if not llama_cpp_available():  # checked before assembling a 1.1 GB file that could not be run
            raise ConfigError(where.at("kind", EMBEDDED_EXTRA_MESSAGE))
        llama_loader = load_llama
    try:
        model_path = resolve_model_path(cfg)
    except ModelFileError as err:
        raise ConfigError(where.at(err.field, err.detail)) from None
    if llama_loader is load_llama:  # the real engine: prove it decodes here before any model call
        ensure_engine_works(str(model_path), n_threads=cfg.threads)
    engine = LlamaCppEngine.from_config(cfg, str(model_path), loader=llama_loader)
    return ClearmedLM(cfg.dspy_model, engine=engine, async_engine=AsyncLlamaCppEngine(engine), **common)
