"""`BackboneConfig`: one ``[backbones.<role>]`` table of a clearmed TOML config.

Three kinds of backbone:

- ``embedded``: a GGUF model run in this process by llama.cpp (the offline default);
- ``openai_compatible``: a server speaking the OpenAI chat API (vLLM, llama.cpp server, Ollama ``/v1``);
- ``hosted``: a provider DSPy knows by prefix (``openai/o3-mini``, ``azure/o3-mini``, ``anthropic/...``).

Secrets never appear in the file: ``api_key_env`` names the environment variable that holds the key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from clearmed.backbones.errors import ConfigError, FieldRuleError, format_validation_error, join_location

__all__ = [
    "BACKBONE_ROLES",
    "DEFAULT_PACKAGED_MODEL",
    "EMBEDDED_ONLY_FIELDS",
    "PATH_FIELDS",
    "BackboneConfig",
    "BackboneKind",
    "ConfigError",
    "format_validation_error",
    "is_openai_reasoning_model",
    "parse_backbone",
    "parse_backbones",
]

BackboneKind = Literal["embedded", "openai_compatible", "hosted"]
PackagedModelName = Literal["qwen2.5-coder-1.5b-instruct-q4_k_m"]
DEFAULT_PACKAGED_MODEL: Final[PackagedModelName] = "qwen2.5-coder-1.5b-instruct-q4_k_m"

# `main` answers; the others are optional specialists the program and optimizers may ask for.
BACKBONE_ROLES: Final = ("main", "assessor", "teacher", "prompt_model", "judge")

EMBEDDED_ONLY_FIELDS: Final = frozenset(
    {
        "model_path",
        "gguf_repo",
        "gguf_file",
        "packaged_model",
        "n_ctx",
        "n_threads",
        "n_batch",
        "seed",
        "prompt_cache_mb",
        "model_cache_dir",
    }
)
# A custom DSPy engine owns its connection, so dspy.LM refuses these next to one.
_NOT_FOR_EMBEDDED: Final = ("api_base", "api_key_env", "timeout")

# Providers that authenticate without an API key (local daemons, cloud credential chains).
_KEYLESS_PROVIDERS: Final = frozenset({"ollama", "ollama_chat", "vertex_ai", "bedrock", "sagemaker"})

_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"

# Mirrors dspy.clients.lm._is_openai_reasoning_model (private in DSPy 3.4): o1/o3/o4/o5 and gpt-5 families.
_REASONING_FAMILY = re.compile(
    r"^(?:o[1345](?:-(?:mini|nano|pro))?(?:-\d{4}-\d{2}-\d{2})?|gpt-5(?:\.\d+)*(?!-chat)(?:-.*)?)$"
)
REASONING_MIN_MAX_TOKENS: Final = 16000


def is_openai_reasoning_model(model: str) -> bool:
    """True for OpenAI reasoning families, which accept only temperature 1.0 and max_tokens >= 16000."""
    return _REASONING_FAMILY.match(model.rsplit("/", 1)[-1].lower()) is not None


class BackboneConfig(BaseModel):
    """One backbone: which model answers, and how DSPy reaches it."""

    # strict: TOML has real types, so "0.2" (a string) or `true` for a number is a mistake worth reporting.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    kind: BackboneKind
    model: str = Field(min_length=1, description="provider/model (hosted), served name, or a short label")
    api_base: str | None = None
    api_key_env: str | None = Field(default=None, pattern=_ENV_NAME, description="NAME of the key's env var")
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, ge=1)
    timeout: float | None = Field(default=None, gt=0.0)
    num_retries: int = Field(default=3, ge=0)
    cache: bool = True

    # embedded only
    model_path: str | None = Field(default=None, min_length=1)
    gguf_repo: str | None = Field(default=None, min_length=1)
    gguf_file: str | None = Field(default=None, min_length=1)
    packaged_model: PackagedModelName | None = DEFAULT_PACKAGED_MODEL
    n_ctx: int = Field(default=8192, ge=512)
    n_threads: int | None = Field(default=None, ge=1)
    n_batch: int = Field(default=512, ge=1)
    seed: int = Field(default=0, ge=0)
    prompt_cache_mb: int = Field(default=512, ge=0, description="llama.cpp RAM prompt-state cache; 0 = off")
    model_cache_dir: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _check_kind_rules(self) -> BackboneConfig:
        if self.kind == "embedded":
            self._check_embedded()
        else:
            misplaced = sorted(EMBEDDED_ONLY_FIELDS & self.model_fields_set)
            if misplaced:
                raise FieldRuleError(misplaced[0], f'only allowed with kind = "embedded", not "{self.kind}"')
        if self.kind == "openai_compatible" and self.api_base is None:
            raise FieldRuleError("api_base", 'required with kind = "openai_compatible"')
        if self.kind == "hosted":
            provider, sep, name = self.model.partition("/")
            if not sep or not provider or not name:
                raise FieldRuleError("model", 'hosted models are "provider/name", e.g. "openai/o3-mini"')
            if self.api_key_env is None and provider not in _KEYLESS_PROVIDERS:
                raise FieldRuleError(
                    "api_key_env",
                    f'required for provider "{provider}" (the NAME of the env var with the key)',
                )
        if self.api_base is not None and not re.match(r"^https?://[^\s/]+", self.api_base):
            raise FieldRuleError("api_base", "must be an http:// or https:// URL")
        self._check_reasoning_model()
        return self

    def _check_embedded(self) -> None:
        for name in _NOT_FOR_EMBEDDED:
            if getattr(self, name) is not None:
                raise FieldRuleError(name, 'not used with kind = "embedded" (the model runs in this process)')
        if (self.gguf_repo is None) != (self.gguf_file is None):
            missing = "gguf_file" if self.gguf_file is None else "gguf_repo"
            raise FieldRuleError(missing, "gguf_repo and gguf_file go together")
        if self.model_path is not None and self.gguf_repo is not None:
            raise FieldRuleError("model_path", "set either model_path or gguf_repo + gguf_file, not both")
        if self.model_path is None and self.gguf_repo is None and self.packaged_model is None:
            raise FieldRuleError("packaged_model", "no model source: set model_path, gguf_repo + gguf_file")

    def _check_reasoning_model(self) -> None:
        # DSPy itself lets temperature = 0 through (it tests truthiness), and the provider then rejects
        # the call at run time; catching it here names the file and the field instead.
        if not is_openai_reasoning_model(self.dspy_model):
            return
        if self.temperature not in (None, 1.0):
            raise FieldRuleError("temperature", "OpenAI reasoning models accept only 1.0 (or leave it unset)")
        if self.max_tokens is not None and self.max_tokens < REASONING_MIN_MAX_TOKENS:
            raise FieldRuleError(
                "max_tokens",
                f"OpenAI reasoning models need >= {REASONING_MIN_MAX_TOKENS} (or leave it unset)",
            )

    @property
    def dspy_model(self) -> str:
        """The model string handed to ``dspy.LM`` (also the label in usage and provenance records)."""
        if self.kind == "openai_compatible":
            return f"openai/{self.model}"
        if self.kind == "embedded":
            return f"local/{self.model}"
        return self.model

    @property
    def threads(self) -> int:
        """llama.cpp thread count: the configured value, else every core."""
        return self.n_threads or os.cpu_count() or 1


# Filesystem fields: relative values are resolved against the config file's folder when one is given.
PATH_FIELDS: Final = ("model_path", "model_cache_dir")


def parse_backbone(
    table: Mapping[str, Any], *, source: str = "", role: str = "main", base: Path | None = None
) -> BackboneConfig:
    """Validate one ``[backbones.<role>]`` table; a problem raises a one-line `ConfigError`.

    With ``base`` (the config file's folder), relative `PATH_FIELDS` are resolved against it, so a
    config travels with its model file; without it they stay relative to the working directory.
    """
    data = dict(table)
    if base is not None:
        for name in PATH_FIELDS:
            value = data.get(name)
            if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
                data[name] = str((base / value).resolve())
    try:
        return BackboneConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, source, join_location("backbones", role))) from None


def parse_backbones(
    tables: Mapping[str, Any], *, source: str = "", base: Path | None = None
) -> dict[str, BackboneConfig]:
    """Validate the whole ``[backbones]`` table: ``main`` is required, roles are from `BACKBONE_ROLES`."""
    where = f"{source}: " if source else ""
    unknown = sorted(set(tables) - set(BACKBONE_ROLES))
    if unknown:
        raise ConfigError(f"{where}backbones.{unknown[0]}: unknown role (expected one of {', '.join(BACKBONE_ROLES)})")
    if "main" not in tables:
        raise ConfigError(f"{where}backbones.main: required table is missing")
    out: dict[str, BackboneConfig] = {}
    for role, table in tables.items():
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}backbones.{role}: must be a table")
        out[role] = parse_backbone(table, source=source, role=role, base=base)
    return out
