"""clearmed.backbones: which language model answers, and how DSPy reaches it.

Public face (the modules behind it hold one concept each):

- `BackboneConfig`, `TokenPrice`, `parse_backbone`, `parse_backbones`: one ``[backbones.<role>]`` TOML table, validated;
- `ConfigError`, `format_validation_error`: one-line config errors naming file and dotted field;
- `build_lm`, `lm_label`: config -> `ClearmedLM` (a `dspy.LM`), and the name it is recorded under;
- `ClearmedLM`, `fatal_lm_error`: thinking stripped from completions, room to think, fatal errors raised as
  `clearmed.errors.FatalServiceError`;
- `split_thinking`, `collect_thinking`, `REASONING_MAX_TOKENS`: reasoning models' ``<think>`` blocks;
- `install_retry_policy`: clearmed's wait between DSPy's LM retries, counted in `clearmed.retries.count_retries`;
- `cost_usd`, `price_of`: dollars per token; `context_window`, `served_context_window`: tokens per call;
- `LlamaCppEngine`, `AsyncLlamaCppEngine`, `EngineStats`: the in-process llama.cpp engine (embedded kind);
- `resolve_model_path`, `PACKAGED_MODELS`: where the embedded GGUF comes from.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Loaded on first use: building the command line or reading a config must not import DSPy and llama.cpp
# (`clearmed config --list` and the front of `clearmed ask`); type checkers still see every name.
if TYPE_CHECKING:
    from clearmed.backbones.client import ClearmedLM, fatal_lm_error
    from clearmed.backbones.config import (
        BACKBONE_ROLES,
        BackboneConfig,
        TokenPrice,
        is_openai_reasoning_model,
        parse_backbone,
        parse_backbones,
    )
    from clearmed.backbones.embedded import AsyncLlamaCppEngine, EngineStats, LlamaCppEngine
    from clearmed.backbones.errors import ConfigError, format_validation_error
    from clearmed.backbones.factory import build_lm, lm_label
    from clearmed.backbones.llama_runtime import unload_models
    from clearmed.backbones.model_files import PACKAGED_MODELS, ModelFileError, PackagedModel, resolve_model_path
    from clearmed.backbones.pricing import cost_usd, price_of
    from clearmed.backbones.reasoning import REASONING_MAX_TOKENS, collect_thinking, split_thinking
    from clearmed.backbones.retry_wait import install_retry_policy

# The one name that is also its module's: importing the module anywhere (the LM client does) binds the package's
# attribute to the module, which a lazy lookup would never replace; so it is bound here (it imports no DSPy).
from clearmed.backbones.context_window import context_window, served_context_window

_HOME: dict[str, str] = {
    "ClearmedLM": "clearmed.backbones.client",
    "fatal_lm_error": "clearmed.backbones.client",
    "BACKBONE_ROLES": "clearmed.backbones.config",
    "BackboneConfig": "clearmed.backbones.config",
    "TokenPrice": "clearmed.backbones.config",
    "is_openai_reasoning_model": "clearmed.backbones.config",
    "parse_backbone": "clearmed.backbones.config",
    "parse_backbones": "clearmed.backbones.config",
    "AsyncLlamaCppEngine": "clearmed.backbones.embedded",
    "EngineStats": "clearmed.backbones.embedded",
    "LlamaCppEngine": "clearmed.backbones.embedded",
    "ConfigError": "clearmed.backbones.errors",
    "format_validation_error": "clearmed.backbones.errors",
    "build_lm": "clearmed.backbones.factory",
    "lm_label": "clearmed.backbones.factory",
    "unload_models": "clearmed.backbones.llama_runtime",
    "PACKAGED_MODELS": "clearmed.backbones.model_files",
    "ModelFileError": "clearmed.backbones.model_files",
    "PackagedModel": "clearmed.backbones.model_files",
    "resolve_model_path": "clearmed.backbones.model_files",
    "cost_usd": "clearmed.backbones.pricing",
    "price_of": "clearmed.backbones.pricing",
    "REASONING_MAX_TOKENS": "clearmed.backbones.reasoning",
    "collect_thinking": "clearmed.backbones.reasoning",
    "split_thinking": "clearmed.backbones.reasoning",
    "install_retry_policy": "clearmed.backbones.retry_wait",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "BACKBONE_ROLES",
    "PACKAGED_MODELS",
    "REASONING_MAX_TOKENS",
    "AsyncLlamaCppEngine",
    "BackboneConfig",
    "ClearmedLM",
    "ConfigError",
    "EngineStats",
    "LlamaCppEngine",
    "ModelFileError",
    "PackagedModel",
    "TokenPrice",
    "build_lm",
    "collect_thinking",
    "context_window",
    "cost_usd",
    "fatal_lm_error",
    "format_validation_error",
    "install_retry_policy",
    "is_openai_reasoning_model",
    "lm_label",
    "parse_backbone",
    "parse_backbones",
    "price_of",
    "resolve_model_path",
    "served_context_window",
    "split_thinking",
    "unload_models",
]
