"""`BackboneConfig`: one ``[backbones.<role>]`` table of a clearmed TOML config.

Three kinds of backbone, each its own model with only its own fields (`EmbeddedBackbone`, `OpenAICompatibleBackbone`,
`HostedBackbone`; what they share is `BackboneConfig`, and `AnyBackbone` is the union a config holds, told apart by
``kind``):

- ``embedded``: a GGUF model run in this process by llama.cpp (the offline default);
- ``openai_compatible``: a server speaking the OpenAI chat API (vLLM, llama.cpp server, Ollama ``/v1``);
- ``hosted``: a provider DSPy knows by prefix (``openai/o3-mini``, ``azure/o3-mini``, ``anthropic/...``).

Secrets never appear in the file: ``api_key_env`` names the environment variable that holds the key.

Provider options for remote kinds: ``reasoning_effort`` (typed), ``extra`` (free-form keyword arguments handed to
``dspy.LM`` as written, e.g. ``chat_template_kwargs = {enable_thinking = false}`` or ``extra_body``; what it may hold:
`backbones.provider_options`), ``reasoning`` (the model thinks before answering: `backbones.reasoning`),
``context_window`` (tokens per call; for ``openai_compatible`` servers it can be read from the server instead:
`backbones.context_window`) and ``price`` (USD per million tokens for a self-hosted model; hosted models are priced
from LiteLLM's map: `backbones.pricing`). OpenAI's reasoning models take only some settings
(`backbones.openai_reasoning`), checked here when the config loads.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ModelWrapValidatorHandler, ValidationError, model_validator

from clearmed.backbones.errors import ConfigError, FieldRuleError, format_validation_error, join_location
from clearmed.backbones.openai_reasoning import REASONING_MIN_MAX_TOKENS, is_openai_reasoning_model
from clearmed.backbones.provider_options import NOT_PROVIDER_OPTIONS, credential_key
from clearmed.backbones.reasoning import REASONING_MAX_TOKENS

__all__ = [
    "BACKBONE_ROLES",
    "DEFAULT_PACKAGED_MODEL",
    "EMBEDDED_ONLY_FIELDS",
    "MIN_THINKING_TOKENS",
    "PATH_FIELDS",
    "REMOTE_ONLY_FIELDS",
    "AnyBackbone",
    "BackboneConfig",
    "BackboneKind",
    "ConfigError",
    "EmbeddedBackbone",
    "HostedBackbone",
    "OpenAICompatibleBackbone",
    "ReasoningEffort",
    "RemoteBackbone",
    "TokenPrice",
    "flat_defaults_dropped",
    "format_validation_error",
    "kind_fields",
    "parse_backbone",
    "parse_backbones",
]

BackboneKind = Literal["embedded", "openai_compatible", "hosted"]
# OpenAI's reasoning_effort values (o-series, gpt-5; vLLM passes it to models that take it, e.g. gpt-oss).
ReasoningEffort = Literal["minimal", "low", "medium", "high"]
PackagedModelName = Literal["qwen2.5-coder-1.5b-instruct-q4_k_m"]
DEFAULT_PACKAGED_MODEL: Final[PackagedModelName] = "qwen2.5-coder-1.5b-instruct-q4_k_m"

# `main` answers; the others are optional specialists the program and optimizers may ask for.
BACKBONE_ROLES: Final = ("main", "assessor", "teacher", "prompt_model", "judge")

# Smallest output budget a `reasoning = true` backbone may have: less is spent on the thought, not the answer.
MIN_THINKING_TOKENS: Final = 2048

# Providers that authenticate without an API key (local daemons, cloud credential chains).
_KEYLESS_PROVIDERS: Final = frozenset({"ollama", "ollama_chat", "vertex_ai", "bedrock", "sagemaker"})

_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class TokenPrice(BaseModel):
    """USD per million tokens: a self-hosted model's cost (GPU hours over throughput), or a hosted model's own rate."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    input: float = Field(default=0.0, ge=0.0, description="USD per 1M prompt tokens")
    output: float = Field(default=0.0, ge=0.0, description="USD per 1M completion tokens")


class BackboneConfig(BaseModel):
    """One backbone, of any kind: which model answers. Each kind is its own model with only its own fields
    (`EmbeddedBackbone`, `OpenAICompatibleBackbone`, `HostedBackbone`); this class holds what they share, and validating
    it (`BackboneConfig.model_validate`) gives the model of the table's kind, reading a run's config snapshot of any
    clearmed version (`flat_defaults_dropped`)."""

    # strict: TOML has real types, so "0.2" (a string) or `true` for a number is a mistake worth reporting.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    kind: BackboneKind
    model: str = Field(min_length=1, description="provider/model (hosted), served name, or a short label")
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, ge=1)
    num_retries: int = Field(default=3, ge=0)
    cache: bool = True
    reasoning: bool = Field(default=False, description="thinks before answering (Qwen3, DeepSeek-R1): room to think")

    @model_validator(mode="wrap")
    @classmethod
    def _of_its_kind(cls, data: Any, handler: ModelWrapValidatorHandler[BackboneConfig]) -> BackboneConfig:
        model = _model_of(data.get("kind")) if cls is BackboneConfig and isinstance(data, Mapping) else None
        # An unknown or missing kind is validated here, so that its error names the kinds there are.
        return model.model_validate(flat_defaults_dropped(data)) if model is not None else handler(data)

    @model_validator(mode="after")
    def _check_thinking(self) -> BackboneConfig:
        self._check_reasoning_model()
        if self.reasoning and self.max_tokens is not None and self.max_tokens < MIN_THINKING_TOKENS:
            raise FieldRuleError(
                "max_tokens",
                f"a reasoning backbone needs >= {MIN_THINKING_TOKENS} to think and answer "
                f"(or leave it unset: {REASONING_MAX_TOKENS})",
            )
        return self

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
    def thinks(self) -> bool:
        """The model reasons before it answers: `reasoning = true`, or an OpenAI reasoning model (o1/o3/o4, gpt-5)."""
        return self.reasoning or is_openai_reasoning_model(self.dspy_model)

    @property
    def output_budget(self) -> int | None:
        """The backbone's max_tokens: as configured; for a reasoning backbone left unset, room to think
        (`REASONING_MAX_TOKENS`; OpenAI's reasoning models: their provider's own default, None)."""
        if self.max_tokens is not None or not self.reasoning or is_openai_reasoning_model(self.dspy_model):
            return self.max_tokens
        return REASONING_MAX_TOKENS

    @property
    def min_output_tokens(self) -> int | None:
        """The floor of every call's output budget, for a backbone that thinks: a per-stage cap below it would be
        spent thinking. None for a backbone that does not think (stage caps apply as set)."""
        if not self.thinks:
            return None
        if is_openai_reasoning_model(self.dspy_model):
            return self.max_tokens or REASONING_MIN_MAX_TOKENS
        return self.output_budget

    @property
    def dspy_model(self) -> str:
        """The model string handed to ``dspy.LM`` (also the label in usage and provenance records)."""
        if self.kind == "openai_compatible":
            return f"openai/{self.model}"
        if self.kind == "embedded":
            return f"local/{self.model}"
        return self.model


class EmbeddedBackbone(BackboneConfig):
    """A GGUF model run in this process by llama.cpp: where its file comes from, and the engine's settings."""

    kind: Literal["embedded"]
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

    @model_validator(mode="before")
    @classmethod
    def _refuse_provider_options(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        # A custom DSPy engine owns its connection, so dspy.LM refuses these next to one; the rest are provider options
        # (the embedded engine's window is n_ctx, and it costs nothing).
        for name in sorted(REMOTE_ONLY_FIELDS):
            if name == "extra" and data.get(name):
                raise FieldRuleError("extra", 'provider options are not used with kind = "embedded"')
            if name != "extra" and data.get(name) is not None:
                raise FieldRuleError(name, 'not used with kind = "embedded" (the model runs in this process)')
        # An empty `extra` or a None (a table built in Python) asks for nothing: read as absent.
        return {key: value for key, value in data.items() if key not in REMOTE_ONLY_FIELDS}

    @model_validator(mode="after")
    def _check_model_source(self) -> EmbeddedBackbone:
        if (self.gguf_repo is None) != (self.gguf_file is None):
            missing = "gguf_file" if self.gguf_file is None else "gguf_repo"
            raise FieldRuleError(missing, "gguf_repo and gguf_file go together")
        if self.model_path is not None and self.gguf_repo is not None:
            raise FieldRuleError("model_path", "set either model_path or gguf_repo + gguf_file, not both")
        if self.model_path is None and self.gguf_repo is None and self.packaged_model is None:
            raise FieldRuleError("packaged_model", "no model source: set model_path, gguf_repo + gguf_file")
        return self

    @property
    def threads(self) -> int:
        """llama.cpp thread count: the configured value, else every core."""
        return self.n_threads or os.cpu_count() or 1


class RemoteBackbone(BackboneConfig):
    """A model DSPy reaches over HTTP: where, with which key, and the provider's options."""

    api_base: str | None = None
    api_key_env: str | None = Field(default=None, pattern=_ENV_NAME, description="NAME of the key's env var")
    timeout: float | None = Field(default=None, gt=0.0)
    reasoning_effort: ReasoningEffort | None = None
    extra: dict[str, Any] = Field(default_factory=dict, description="provider options passed to dspy.LM as written")
    context_window: int | None = Field(default=None, ge=512, description="tokens per call, prompt and output")
    price: TokenPrice | None = None

    @model_validator(mode="before")
    @classmethod
    def _refuse_engine_settings(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            misplaced = sorted(EMBEDDED_ONLY_FIELDS & set(data))
            if misplaced:
                raise FieldRuleError(misplaced[0], f'only allowed with kind = "embedded", not "{data.get("kind")}"')
        return data

    @model_validator(mode="after")
    def _check_connection(self) -> RemoteBackbone:
        if self.api_base is not None and not re.match(r"^https?://[^\s/]+", self.api_base):
            raise FieldRuleError("api_base", "must be an http:// or https:// URL")
        if self.api_base is not None and "@" in self.api_base.split("/")[2]:
            # The OpenAI client sends its own Authorization header and never the URL's user and password, so such a
            # backbone could never connect: refused here, the URL (and its password) left out of the message.
            raise FieldRuleError(
                "api_base",
                "holds a user name or password (user:password@host), which the client never sends; give the host "
                "alone and the key through api_key_env (the NAME of its environment variable)",
            )
        self._check_extra()
        return self

    def _check_extra(self) -> None:
        for name in sorted(self.extra):
            if name in type(self).model_fields or name in EMBEDDED_ONLY_FIELDS or name == "max_completion_tokens":
                typed = "max_tokens" if name == "max_completion_tokens" else name
                raise FieldRuleError(f"extra.{name}", f"set {typed} in this table instead (it is validated there)")
            if name in NOT_PROVIDER_OPTIONS:
                raise FieldRuleError(f"extra.{name}", "not a provider option clearmed passes through")
        secret = credential_key(self.extra, "extra")
        if secret is not None:
            raise FieldRuleError(secret, "credentials do not belong in the file: name their variable in api_key_env")


class OpenAICompatibleBackbone(RemoteBackbone):
    """A server speaking the OpenAI chat API (vLLM, llama.cpp server, Ollama ``/v1``, a LiteLLM proxy)."""

    kind: Literal["openai_compatible"]

    @model_validator(mode="after")
    def _check_address(self) -> OpenAICompatibleBackbone:
        if self.api_base is None:
            raise FieldRuleError("api_base", 'required with kind = "openai_compatible"')
        return self


class HostedBackbone(RemoteBackbone):
    """A provider DSPy knows by the model's prefix (``openai/o3-mini``, ``azure/o3-mini``, ``anthropic/...``)."""

    kind: Literal["hosted"]

    @model_validator(mode="after")
    def _check_provider(self) -> HostedBackbone:
        provider, sep, name = self.model.partition("/")
        if not sep or not provider or not name:
            raise FieldRuleError("model", 'hosted models are "provider/name", e.g. "openai/o3-mini"')
        if self.api_key_env is None and provider not in _KEYLESS_PROVIDERS:
            raise FieldRuleError(
                "api_key_env",
                f'required for provider "{provider}" (the NAME of the env var with the key)',
            )
        return self


# A config's backbone table, validated as the model of its `kind` (what `ClearmedConfig.backbones` holds).
AnyBackbone = Annotated[EmbeddedBackbone | OpenAICompatibleBackbone | HostedBackbone, Field(discriminator="kind")]
_KINDS: Final[dict[str, type[BackboneConfig]]] = {
    "embedded": EmbeddedBackbone,
    "openai_compatible": OpenAICompatibleBackbone,
    "hosted": HostedBackbone,
}
EMBEDDED_ONLY_FIELDS: Final = frozenset(EmbeddedBackbone.model_fields) - frozenset(BackboneConfig.model_fields)
REMOTE_ONLY_FIELDS: Final = frozenset(RemoteBackbone.model_fields) - frozenset(BackboneConfig.model_fields)

# What the flat BackboneConfig (one model for every kind, until it was split by kind) wrote into a run's config.json
# for the fields of the other kinds: always these values, as it refused any other, so they are read as absent.
_FLAT_DEFAULTS: Final[Mapping[str, object]] = {
    "packaged_model": "qwen2.5-coder-1.5b-instruct-q4_k_m",
    "n_ctx": 8192,
    "n_batch": 512,
    "seed": 0,
    "prompt_cache_mb": 512,
    "extra": {},
}


def _model_of(kind: object) -> type[BackboneConfig] | None:
    return _KINDS.get(kind) if isinstance(kind, str) else None


def kind_fields(kind: object) -> frozenset[str] | None:
    """The fields a backbone of ``kind`` has (None for a kind that does not exist)."""
    model = _model_of(kind)
    return frozenset(model.model_fields) if model is not None else None


def flat_defaults_dropped(table: Mapping[str, Any]) -> dict[str, Any]:
    """A backbone table of a config snapshot without the other kinds' fields an older clearmed wrote at their only
    possible values; any other value stays, for validation to refuse."""
    fields = kind_fields(table.get("kind")) or frozenset(table)
    return {
        key: value
        for key, value in table.items()
        if key in fields or key not in _FLAT_DEFAULTS or _FLAT_DEFAULTS[key] != value
    }


# Filesystem fields: relative values are resolved against the config file's folder when one is given.
PATH_FIELDS: Final = ("model_path", "model_cache_dir")


def parse_backbone(
    table: Mapping[str, Any], *, source: str = "", role: str = "main", base: Path | None = None
) -> AnyBackbone:
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
    # A file's table is validated as its kind's model: a field of another kind is refused, even at its default.
    model = _model_of(data.get("kind")) or BackboneConfig
    try:
        # BackboneConfig itself only for a kind that does not exist, which it refuses: the result is of one kind.
        return cast("AnyBackbone", model.model_validate(data))
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, source, join_location("backbones", role))) from None


def parse_backbones(tables: Mapping[str, Any], *, source: str = "", base: Path | None = None) -> dict[str, AnyBackbone]:
    """Validate the whole ``[backbones]`` table: ``main`` is required, roles are from `BACKBONE_ROLES`."""
    where = f"{source}: " if source else ""
    unknown = sorted(set(tables) - set(BACKBONE_ROLES))
    if unknown:
        raise ConfigError(f"{where}backbones.{unknown[0]}: unknown role (expected one of {', '.join(BACKBONE_ROLES)})")
    if "main" not in tables:
        raise ConfigError(f"{where}backbones.main: required table is missing")
    out: dict[str, AnyBackbone] = {}
    for role, table in tables.items():
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}backbones.{role}: must be a table")
        out[role] = parse_backbone(table, source=source, role=role, base=base)
    return out
