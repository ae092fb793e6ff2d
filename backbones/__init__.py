"""clearmed.backbones: which language model answers, and how DSPy reaches it.

Public face (the modules behind it hold one concept each):

- `BackboneConfig`, `parse_backbone`, `parse_backbones`: one ``[backbones.<role>]`` TOML table, validated;
- `ConfigError`, `format_validation_error`: one-line config errors naming file and dotted field;
- `build_lm`, `lm_label`: config -> `dspy.LM`, and the name it is recorded under;
- `LlamaCppEngine`, `AsyncLlamaCppEngine`, `EngineStats`: the in-process llama.cpp engine (embedded kind);
- `resolve_model_path`, `PACKAGED_MODELS`: where the embedded GGUF comes from.
"""

from clearmed.backbones.config import (
    BACKBONE_ROLES,
    BackboneConfig,
    is_openai_reasoning_model,
    parse_backbone,
    parse_backbones,
)
from clearmed.backbones.embedded import AsyncLlamaCppEngine, EngineStats, LlamaCppEngine
from clearmed.backbones.errors import ConfigError, format_validation_error
from clearmed.backbones.factory import build_lm, lm_label
from clearmed.backbones.llama_runtime import unload_models
from clearmed.backbones.model_files import PACKAGED_MODELS, ModelFileError, PackagedModel, resolve_model_path

__all__ = [
    "BACKBONE_ROLES",
    "PACKAGED_MODELS",
    "AsyncLlamaCppEngine",
    "BackboneConfig",
    "ConfigError",
    "EngineStats",
    "LlamaCppEngine",
    "ModelFileError",
    "PackagedModel",
    "build_lm",
    "format_validation_error",
    "is_openai_reasoning_model",
    "lm_label",
    "parse_backbone",
    "parse_backbones",
    "resolve_model_path",
    "unload_models",
]
