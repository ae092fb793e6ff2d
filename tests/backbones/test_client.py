"""ClearmedLM over real HTTP (a scripted server on 127.0.0.1): throttling retried with the server's wait and counted,
fatal refusals raised as one line that names the backbone and never the key, provider options on the wire."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Iterator
from typing import Any

import dspy
import pytest
from dspy.clients import execution

from clearmed.backbones import client
from clearmed.backbones.config import parse_backbone
from clearmed.backbones.factory import build_lm
from clearmed.backbones.fatal_errors import fatal_lm_error
from clearmed.backbones.reasoning import collect_thinking
from clearmed.core.errors import FatalServiceError
from clearmed.core.retries import count_retries

from .fake_openai import (
    ANSWER,
    BAD_KEY,
    NO_MODEL,
    NO_MODEL_OLD_VLLM,
    NO_QUOTA,
    RATE_LIMITED,
    Reply,
    ScriptedOpenAI,
    openai_error,
)

SECRET = "sk-live-0123456789abcdefghij"


@pytest.fixture
def server() -> Iterator[ScriptedOpenAI]:
    with ScriptedOpenAI() as fake:
        yield fake


@pytest.fixture(autouse=True)
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits between retries (clearmed's, and DSPy's should it ever retry itself), recorded instead of slept."""
    asked: list[float] = []
    monkeypatch.setattr(execution, "time", types.SimpleNamespace(sleep=asked.append))
    monkeypatch.setattr(client, "pause", asked.append)
    return asked


def backbone(server: ScriptedOpenAI, kind: str = "openai_compatible", **table: Any) -> Any:
    if kind == "hosted":  # OpenAI itself, at the fake's address
        base = {"kind": "hosted", "model": "openai/gpt-4.1", "api_key_env": "OPENAI_API_KEY"}
    else:
        base = {"kind": "openai_compatible", "model": "served-model", "api_key_env": "VLLM_KEY"}
    return parse_backbone({**base, "api_base": server.api_base, "cache": False, "num_retries": 3, **table})


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("VLLM_KEY", SECRET)


def ask(lm: dspy.LM) -> str:
    with dspy.context(adapter=dspy.ChatAdapter(use_json_adapter_fallback=False)):
        return str(dspy.Predict("question -> answer")(question="Koplik spots?", lm=lm).answer)


@pytest.mark.parametrize("kind", ["openai_compatible", "hosted"])
def test_a_429_burst_is_retried_after_retry_after_and_counted(
    server: ScriptedOpenAI, waits: list[float], kind: str
) -> None:
    server.script = [RATE_LIMITED, RATE_LIMITED]
    lm = build_lm(backbone(server, kind))
    with count_retries() as retries:
        assert ask(lm) == "measles"
    assert len(server.requests) == 3
    assert retries.by_service == {"lm": 2}
    assert len(waits) == 2
    assert all(1.0 <= wait <= 2.0 for wait in waits)  # Retry-After: 1 (and up to a second of jitter)


def test_the_ratelimit_reset_header_sets_the_wait_when_retry_after_is_missing(
    server: ScriptedOpenAI, waits: list[float]
) -> None:
    status, body, _ = RATE_LIMITED
    headers = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "3s"}
    server.script = [(status, body, headers)]
    ask(build_lm(backbone(server)))
    assert len(waits) == 1
    assert 3.0 <= waits[0] <= 4.0


def test_retries_exhausted_raise_the_transient_error_as_before(server: ScriptedOpenAI, waits: list[float]) -> None:
    server.script = [openai_error(503, "overloaded", kind="server_error")] * 10
    lm = build_lm(backbone(server, num_retries=2))
    with count_retries() as retries, pytest.raises(dspy.LMServerError):
        lm("hi")
    assert retries.total == 2
    assert len(server.requests) == 3
    assert [0.5 <= waits[0] <= 1.0, 1.0 <= waits[1] <= 2.0] == [True, True]  # backoff with jitter


@pytest.mark.parametrize("kind", ["openai_compatible", "hosted"])
@pytest.mark.parametrize(
    ("reply", "cause", "status", "said"),
    [
        (BAD_KEY, "authentication failed", 401, "Incorrect API key provided."),
        (openai_error(403, "Project does not have access.", kind="permission_error"), "authentication failed", 403, ""),
        (openai_error(402, "Payment required.", kind="billing"), "billing or quota exhausted", 402, ""),
        (NO_QUOTA, "billing or quota exhausted", 429, "You exceeded your current quota."),
        (NO_MODEL, "model not found", 404, "The model `gpt-9` does not exist."),
        (NO_MODEL_OLD_VLLM, "model not found", 404, ""),
    ],
)
def test_fatal_refusals_raise_one_line_and_are_never_retried(
    server: ScriptedOpenAI, kind: str, reply: Reply, cause: str, status: int, said: str
) -> None:
    server.script = [reply] * 5
    lm = build_lm(backbone(server, kind), role="assessor")
    with count_retries() as retries, pytest.raises(FatalServiceError) as info:
        ask(lm)
    message = str(info.value)
    model = "openai/gpt-4.1" if kind == "hosted" else "openai/served-model"
    assert message.startswith(f"assessor backbone {model} at {server.api_base}: {cause} (HTTP {status})")
    assert said in message
    assert "\n" not in message
    assert SECRET not in message
    assert len(server.requests) == 1
    assert retries.total == 0
    assert isinstance(info.value.__cause__, dspy.LMError)


# The native engine, and DSPy's LiteLLM engine (taken for options the native one cannot carry).
ENGINES = {"native": {}, "litellm": {"extra": {"chat_template_kwargs": {"enable_thinking": False}}}}


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("kind", ["openai_compatible", "hosted"])
def test_a_refused_connection_before_any_reply_stops_with_one_line_naming_the_endpoint(
    closed_port: int, waits: list[float], kind: str, engine: str
) -> None:
    """Before: a mistyped address was retried and recorded as a degraded question, for every question of the run."""
    base = f"http://127.0.0.1:{closed_port}/v1"
    table = {"kind": kind, "model": "openai/gpt-4.1" if kind == "hosted" else "served-model", "api_base": base}
    lm = build_lm(parse_backbone({**table, "api_key_env": "VLLM_KEY", "num_retries": 3, **ENGINES[engine]}))
    with count_retries() as retries, pytest.raises(FatalServiceError) as info:
        ask(lm)
    message = str(info.value)
    assert info.value.cause == "unreachable"
    assert ": unreachable: " in message
    assert f"http://127.0.0.1:{closed_port} refused the connection" in message
    assert "\n" not in message
    assert SECRET not in message
    assert (retries.total, waits) == (0, [])  # never retried: every attempt would meet the same closed port


def test_an_unknown_host_before_any_reply_stops_the_run() -> None:
    lm = build_lm(
        parse_backbone({"kind": "openai_compatible", "model": "m", "api_base": "http://no-such-host.invalid:8000/v1"})
    )
    with pytest.raises(
        FatalServiceError, match=r"unreachable: host not found: http://no-such-host\.invalid:8000 \(check the address"
    ):
        lm("hi")


def test_a_refused_connection_after_the_endpoint_answered_is_transient_and_retried(waits: list[float]) -> None:
    """A server that answered and then refuses is restarting: retried, then raised as it came (a degraded question)."""
    with ScriptedOpenAI() as fake:
        lm = build_lm(parse_backbone({"kind": "openai_compatible", "model": "served-model", "api_base": fake.api_base,
                                      "cache": False, "num_retries": 2}))  # fmt: skip
        assert ask(lm) == "measles"
    with count_retries() as retries, pytest.raises(dspy.LMTransportError):
        ask(lm)
    assert retries.total == len(waits) == 2


def test_the_async_path_stops_on_a_refused_endpoint_and_retries_a_busy_one(
    closed_port: int, server: ScriptedOpenAI, waits: list[float]
) -> None:
    refused = build_lm(
        parse_backbone({"kind": "openai_compatible", "model": "m", "api_base": f"http://127.0.0.1:{closed_port}/v1"})
    )
    with pytest.raises(FatalServiceError, match="refused the connection"):
        asyncio.run(refused.acall("hi"))
    server.script = [openai_error(503, "overloaded", kind="server_error")]
    lm = build_lm(backbone(server, num_retries=2))
    with count_retries() as retries:
        outputs = asyncio.run(lm.acall("hi"))
    assert "measles" in str(outputs)
    assert retries.total == 1
    assert len(server.requests) == 2


def test_a_key_echoed_by_the_server_is_not_repeated(server: ScriptedOpenAI) -> None:
    server.script = [openai_error(401, f"Incorrect API key provided: {SECRET}", code="invalid_api_key")]
    with pytest.raises(FatalServiceError) as info:
        build_lm(backbone(server))("hi")
    assert SECRET not in str(info.value)
    assert "***" in str(info.value)


def test_a_refused_prompt_is_not_fatal(server: ScriptedOpenAI) -> None:
    server.script = [
        openai_error(400, "This model's maximum context length is 8192 tokens.", code="context_length_exceeded")
    ]
    with pytest.raises(dspy.ContextWindowExceededError):
        build_lm(backbone(server))("hi")


def test_provider_options_reach_the_server(server: ScriptedOpenAI) -> None:
    lm = build_lm(
        backbone(
            server,
            reasoning_effort="low",
            extra={"chat_template_kwargs": {"enable_thinking": False}, "top_k": 20, "repetition_penalty": 1.05},
        )
    )
    assert ask(lm) == "measles"
    body = server.requests[-1]["body"]
    assert body["reasoning_effort"] == "low"
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert (body["top_k"], body["repetition_penalty"]) == (20, 1.05)


def test_an_unparsed_think_block_is_stripped_over_http() -> None:
    with ScriptedOpenAI(f"<think>Koplik spots: measles.</think>\n{ANSWER}") as fake:
        lm = build_lm(backbone(fake, reasoning=True))
        with collect_thinking() as log:
            assert ask(lm) == "measles"
        assert log.texts == ["Koplik spots: measles."]
        assert (
            fake.requests[-1]["body"].get("max_completion_tokens", fake.requests[-1]["body"].get("max_tokens")) == 8192
        )


def test_the_litellm_engine_path_retries_and_stops_alike(server: ScriptedOpenAI) -> None:
    """Options the native engine cannot carry (chat_template_kwargs) send the call through DSPy's LiteLLM engine;
    throttling and refusals are handled the same there."""
    lm = build_lm(backbone(server, extra={"chat_template_kwargs": {"enable_thinking": False}}))
    server.script = [RATE_LIMITED]
    with count_retries() as retries:
        assert ask(lm) == "measles"
    assert retries.by_service == {"lm": 1}
    server.script = [NO_QUOTA] * 3
    with pytest.raises(FatalServiceError, match=r"billing or quota exhausted \(HTTP 429\): You exceeded your current"):
        lm("hi")
    assert len(server.requests) == 3  # 429 + success, then the quota refusal once


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (dspy.LMAuthError("bad key", status=401), "auth"),
        (dspy.LMNotConfiguredError("no credential"), "auth"),
        (dspy.LMBillingError("no balance", status=402), "billing"),
        (dspy.LMUnsupportedModelError("no such model", status=404), "model_not_found"),
        (dspy.LMInvalidRequestError("", status=404), "model_not_found"),
        (dspy.LMInvalidRequestError("bad request", status=400), None),
        (dspy.ContextWindowExceededError(message="too long"), None),
        (dspy.LMRateLimitError("slow down", status=429), None),
        (dspy.LMServerError("boom", status=500), None),
        (dspy.LMTimeoutError("slow"), None),
        (dspy.LMTransportError("refused"), None),
    ],
)
def test_which_lm_errors_are_fatal(error: Exception, cause: str | None) -> None:
    fatal = fatal_lm_error(error, "main backbone m")
    assert (fatal.cause if fatal is not None else None) == cause
