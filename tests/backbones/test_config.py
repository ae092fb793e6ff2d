"""BackboneConfig parsing and its one-line errors."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from clearmed.backbones.config import AnyBackbone, parse_backbone, parse_backbones
from clearmed.backbones.errors import ConfigError, format_validation_error
from clearmed.backbones.openai_reasoning import is_openai_reasoning_model

SOURCE = "configs/x.toml"


def parse(toml_table: str, role: str = "main") -> AnyBackbone:
    return parse_backbone(tomllib.loads(toml_table), source=SOURCE, role=role)


def error_of(table: dict[str, Any], role: str = "main") -> str:
    with pytest.raises(ConfigError) as info:
        parse_backbone(table, source=SOURCE, role=role)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_embedded_defaults() -> None:
    cfg = parse('kind = "embedded"\nmodel = "qwen-coder"')
    assert cfg.packaged_model == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert (cfg.n_ctx, cfg.n_batch, cfg.seed, cfg.prompt_cache_mb, cfg.num_retries) == (8192, 512, 0, 512, 3)
    assert cfg.cache is True
    assert cfg.threads >= 1
    assert cfg.dspy_model == "local/qwen-coder"


def test_remote_kinds_parse() -> None:
    vllm = parse(
        'kind = "openai_compatible"\nmodel = "Qwen/Qwen3.5-9B"\napi_base = "http://127.0.0.1:8000/v1"\n'
        "temperature = 0\ntop_p = 0.95\nmax_tokens = 1024\ntimeout = 300"
    )
    assert vllm.dspy_model == "openai/Qwen/Qwen3.5-9B"
    assert vllm.temperature == 0.0
    hosted = parse('kind = "hosted"\nmodel = "azure/o3-mini"\napi_key_env = "AZURE_API_KEY"\ntimeout = 120')
    assert hosted.dspy_model == "azure/o3-mini"


def test_keyless_hosted_provider_needs_no_key_variable() -> None:
    assert parse('kind = "hosted"\nmodel = "ollama_chat/llama3"').api_key_env is None


def test_bad_value_names_file_and_field() -> None:
    message = error_of({"kind": "embedded", "model": "m", "temperature": "hot"})
    assert message == "configs/x.toml: backbones.main.temperature: Input should be a valid number"


def test_unknown_key_is_an_error() -> None:
    assert error_of({"kind": "embedded", "model": "m", "temprature": 0.1}) == (
        "configs/x.toml: backbones.main.temprature: unknown key"
    )


def test_pasted_api_key_is_refused_without_echoing_it() -> None:
    secret = "sk-live-0123456789"
    message = error_of({"kind": "hosted", "model": "openai/o3-mini", "api_key_env": "K", "api_key": secret})
    assert "backbones.main.api_key: unknown key" in message
    assert "api_key_env" in message
    assert secret not in message


def test_key_value_in_api_key_env_is_refused_without_echoing_it() -> None:
    secret = "sk-live-0123456789"
    message = error_of({"kind": "hosted", "model": "openai/o3-mini", "api_key_env": secret})
    assert message.startswith("configs/x.toml: backbones.main.api_key_env: String should match pattern")
    assert secret not in message


def test_missing_required_key() -> None:
    assert error_of({"kind": "embedded"}) == "configs/x.toml: backbones.main.model: required key is missing"


def test_several_errors_stay_on_one_line() -> None:
    message = error_of({"kind": "embedded", "model": "m", "n_ctx": 10, "seed": -1})
    assert "backbones.main.n_ctx:" in message
    assert "backbones.main.seed:" in message
    assert "; " in message


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({"kind": "local"}, "backbones.main.kind: Input should be 'embedded', 'openai_compatible' or 'hosted'"),
        (
            {"kind": "hosted", "model": "openai/gpt-4o", "api_key_env": "K", "n_ctx": 4096},
            'backbones.main.n_ctx: only allowed with kind = "embedded", not "hosted"',
        ),
        (
            {"kind": "openai_compatible", "model": "q", "api_base": "http://x/v1", "model_path": "/m.gguf"},
            'backbones.main.model_path: only allowed with kind = "embedded", not "openai_compatible"',
        ),
        (
            {"kind": "openai_compatible", "model": "q"},
            'backbones.main.api_base: required with kind = "openai_compatible"',
        ),
        (
            {"kind": "openai_compatible", "model": "q", "api_base": "127.0.0.1:8000"},
            "backbones.main.api_base: must be an http:// or https:// URL",
        ),
        ({"kind": "hosted", "model": "o3-mini", "api_key_env": "K"}, "backbones.main.model: hosted models are"),
        ({"kind": "hosted", "model": "openai/o3-mini"}, 'backbones.main.api_key_env: required for provider "openai"'),
        (
            {"kind": "embedded", "model": "m", "api_base": "http://x"},
            'backbones.main.api_base: not used with kind = "embedded"',
        ),
        ({"kind": "embedded", "model": "m", "timeout": 5.0}, "backbones.main.timeout: not used with kind"),
        ({"kind": "embedded", "model": "m", "gguf_repo": "a/b"}, "backbones.main.gguf_file: gguf_repo and gguf_file"),
        (
            {"kind": "embedded", "model": "m", "model_path": "/x.gguf", "gguf_repo": "a/b", "gguf_file": "f.gguf"},
            "backbones.main.model_path: set either model_path or gguf_repo",
        ),
        ({"kind": "embedded", "model": "m", "packaged_model": None}, "backbones.main.packaged_model: no model source"),
        ({"kind": "embedded", "model": "m", "packaged_model": "llama-70b"}, "backbones.main.packaged_model: Input"),
        ({"kind": "embedded", "model": "m", "max_tokens": 1.5}, "backbones.main.max_tokens: Input should be a valid"),
        ({"kind": "embedded", "model": "m", "cache": "yes"}, "backbones.main.cache: Input should be a valid boolean"),
        ({"kind": "embedded", "model": "m", "top_p": 0}, "backbones.main.top_p: Input should be greater than 0"),
    ],
)
def test_rule_violations_name_the_field(table: dict[str, Any], expected: str) -> None:
    assert error_of(table).startswith(f"{SOURCE}: {expected}")


@pytest.mark.parametrize("model", ["openai/o3-mini", "azure/o3-mini", "openai/o1", "openai/gpt-5", "openai/o4-mini"])
def test_reasoning_models_need_temperature_one_and_room_to_think(model: str) -> None:
    base = {"kind": "hosted", "model": model, "api_key_env": "K"}
    assert "backbones.judge.temperature: OpenAI reasoning models accept only 1.0" in error_of(
        {**base, "temperature": 0.0}, role="judge"
    )
    assert "backbones.judge.max_tokens: OpenAI reasoning models need >= 16000" in error_of(
        {**base, "max_tokens": 1024}, role="judge"
    )
    ok = parse_backbone({**base, "temperature": 1.0, "max_tokens": 16000})
    assert ok.max_tokens == 16000


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("openai/o3-mini", True),
        ("azure/o3-mini-2025-01-31", True),
        ("gpt-5.1", True),
        ("openai/gpt-5-chat", False),
        ("openai/gpt-4o", False),
        ("openai/Qwen/Qwen3.5-9B", False),
        ("local/o3-helper", False),
    ],
)
def test_reasoning_model_detection(model: str, expected: bool) -> None:
    assert is_openai_reasoning_model(model) is expected


def test_no_source_means_no_file_prefix() -> None:
    with pytest.raises(ConfigError, match=r"^backbones\.main\.temperature: "):
        parse_backbone({"kind": "embedded", "model": "m", "temperature": 3.0})


def test_parse_backbones_requires_main_and_known_roles() -> None:
    dual = parse_backbones(
        {
            "main": {"kind": "embedded", "model": "m"},
            "assessor": {"kind": "hosted", "model": "openai/gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"},
        },
        source=SOURCE,
    )
    assert set(dual) == {"main", "assessor"}
    with pytest.raises(ConfigError, match=r"^configs/x\.toml: backbones\.main: required table is missing$"):
        parse_backbones({"judge": {"kind": "embedded", "model": "m"}}, source=SOURCE)
    with pytest.raises(ConfigError, match=r"backbones\.critic: unknown role"):
        parse_backbones({"main": {"kind": "embedded", "model": "m"}, "critic": {}}, source=SOURCE)
    with pytest.raises(ConfigError, match=r"backbones\.assessor\.model: required key is missing"):
        parse_backbones({"main": {"kind": "embedded", "model": "m"}, "assessor": {"kind": "embedded"}})
    with pytest.raises(ConfigError, match=r"backbones\.main: must be a table"):
        parse_backbones({"main": "embedded"})


def test_format_validation_error_is_reusable_for_other_sections() -> None:
    class Search(BaseModel):
        model_config = ConfigDict(extra="forbid")
        k: int
        domains: list[str] = []

    with pytest.raises(ValidationError) as info:
        Search.model_validate({"k": "many", "domains": ["ok", 3], "colour": "red"})
    message = format_validation_error(info.value, "c.toml", "search")
    assert message == (
        "c.toml: search.k: Input should be a valid integer, unable to parse string as an integer; "
        "search.domains[1]: Input should be a valid string; search.colour: unknown key"
    )
    assert format_validation_error(info.value, "", "").startswith("k: Input should be")


def test_config_is_immutable() -> None:
    cfg = parse_backbone({"kind": "embedded", "model": "m"})
    with pytest.raises(ValidationError):
        cfg.temperature = 0.5  # type: ignore[misc]


def test_relative_paths_resolve_against_the_config_folder(tmp_path: Path) -> None:
    table = {"kind": "embedded", "model": "m", "model_path": "models/x.gguf", "model_cache_dir": "~/cache"}
    cfg = parse_backbones({"main": table}, source=SOURCE, base=tmp_path)["main"]
    assert cfg.model_path == str(tmp_path / "models" / "x.gguf")
    assert cfg.model_cache_dir == "~/cache"  # home-relative stays as written (expanded at use)
    assert parse_backbone(table).model_path == "models/x.gguf"  # no base: as written


# ------------------------------------------------------------------ provider options


def test_provider_options_parse() -> None:
    cfg = parse(
        'kind = "openai_compatible"\nmodel = "Qwen/Qwen3.5-9B"\napi_base = "http://127.0.0.1:8000/v1"\n'
        'reasoning = true\nreasoning_effort = "low"\ncontext_window = 32768\n'
        "extra = {chat_template_kwargs = {enable_thinking = false}, top_k = 20}\n"
        "price = {input = 0.05, output = 0.2}"
    )
    assert cfg.reasoning is True
    assert cfg.reasoning_effort == "low"
    assert cfg.context_window == 32768
    assert cfg.extra == {"chat_template_kwargs": {"enable_thinking": False}, "top_k": 20}
    assert (cfg.price.input, cfg.price.output) == (0.05, 0.2) if cfg.price else False
    plain = parse('kind = "hosted"\nmodel = "openai/gpt-4.1"\napi_key_env = "OPENAI_API_KEY"')
    assert (plain.reasoning, plain.reasoning_effort, plain.extra, plain.context_window, plain.price) == (
        False,
        None,
        {},
        None,
        None,
    )


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({"extra": {"temperature": 0.2}}, "backbones.main.extra.temperature: set temperature in this table instead"),
        (
            {"extra": {"max_completion_tokens": 9}},
            "backbones.main.extra.max_completion_tokens: set max_tokens in this table",
        ),
        (
            {"extra": {"api_key": "sk-live-0123456789"}},
            "backbones.main.extra.api_key: credentials do not belong in the file",
        ),
        (
            {"extra": {"extra_headers": {"Authorization": "Bearer x"}}},
            "backbones.main.extra.extra_headers: credentials",
        ),
        ({"extra": {"engine": "litellm"}}, "backbones.main.extra.engine: not a provider option"),
        (
            {"extra": {"extra_body": {"auth": {"Token": "sk-live-0123456789"}}}},
            "backbones.main.extra.extra_body.auth.Token: credentials",
        ),
        ({"reasoning_effort": "extreme"}, "backbones.main.reasoning_effort: Input should be 'minimal', 'low'"),
        ({"context_window": 100}, "backbones.main.context_window: Input should be greater than or equal to 512"),
        ({"price": {"input": -1.0}}, "backbones.main.price.input: Input should be greater than or equal to 0"),
        ({"price": {"per_call": 1.0}}, "backbones.main.price.per_call: unknown key"),
        ({"reasoning": True, "max_tokens": 1024}, "backbones.main.max_tokens: a reasoning backbone needs >= 2048"),
    ],
)
def test_provider_option_rules(table: dict[str, Any], expected: str) -> None:
    base = {"kind": "openai_compatible", "model": "q", "api_base": "http://127.0.0.1:8000/v1"}
    message = error_of({**base, **table})
    assert message.startswith(f"{SOURCE}: {expected}")
    assert "sk-live" not in message


@pytest.mark.parametrize(
    ("field", "value"),
    [("extra", {"top_k": 20}), ("reasoning_effort", "low"), ("context_window", 4096), ("price", {"input": 1.0})],
)
def test_provider_options_are_not_for_the_embedded_engine(field: str, value: object) -> None:
    assert f"backbones.main.{field}: " in error_of({"kind": "embedded", "model": "m", field: value})
    assert parse_backbone({"kind": "embedded", "model": "m", "reasoning": True}).thinks  # a local Qwen3 GGUF


@pytest.mark.parametrize(
    ("table", "budget", "floor"),
    [
        ({"kind": "openai_compatible", "model": "q", "api_base": "http://x/v1"}, None, None),
        ({"kind": "openai_compatible", "model": "q", "api_base": "http://x/v1", "max_tokens": 512}, 512, None),
        ({"kind": "openai_compatible", "model": "q", "api_base": "http://x/v1", "reasoning": True}, 8192, 8192),
        (
            {
                "kind": "openai_compatible",
                "model": "q",
                "api_base": "http://x/v1",
                "reasoning": True,
                "max_tokens": 12000,
            },
            12000,
            12000,
        ),
        ({"kind": "hosted", "model": "openai/o3-mini", "api_key_env": "K"}, None, 16000),
        ({"kind": "hosted", "model": "openai/o3-mini", "api_key_env": "K", "max_tokens": 25000}, 25000, 25000),
        ({"kind": "hosted", "model": "openai/gpt-4.1", "api_key_env": "K"}, None, None),
    ],
)
def test_output_budgets_leave_room_to_think(table: dict[str, Any], budget: int | None, floor: int | None) -> None:
    cfg = parse_backbone(table)
    assert (cfg.output_budget, cfg.min_output_tokens) == (budget, floor)


def test_the_shipped_remote_configs_carry_their_run_and_provider_settings() -> None:
    from clearmed.config import load_config

    o3 = load_config("o3-mini")
    assert o3.run.num_threads == 8
    assert o3.backbones["main"].reasoning_effort == "medium"
    assert o3.backbones["main"].thinks
    vllm = load_config("qwen3.5-9b-vllm")
    main = vllm.backbones["main"]
    assert main.reasoning
    assert main.output_budget == 8192
    assert main.extra == {"chat_template_kwargs": {"enable_thinking": True}}
    assert main.context_window == 32768
    assert vllm.run.num_threads == 8
    dual = load_config("dual-model")
    assert dual.backbones["main"] == main
    assert dual.backbones["assessor"].reasoning_effort == "medium"
