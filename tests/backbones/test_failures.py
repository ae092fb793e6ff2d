"""One failure policy for every LM call (issue 32 item 2, issue 37): each provider's real context-length body is read as
an overflow with the window and prompt size it names, through the real HTTP client; a 200 that is no reply is retried
as transient; the classification table."""

from __future__ import annotations

import types
from collections.abc import Iterator
from typing import Any

import dspy
import pytest
from dspy.clients import execution

from clearmed.backbones import client
from clearmed.backbones.config import parse_backbone
from clearmed.backbones.factory import build_lm
from clearmed.backbones.failures import ContextOverflowError, classify, read_overflow
from clearmed.core.errors import FatalServiceError
from clearmed.core.retries import count_retries

from .replay_server import REPLIES, ReplayServer, Reply

OVERFLOWS = REPLIES["overflow"]
# Shapes that reach clearmed through an OpenAI-compatible server (Anthropic's comes through its own provider).
SERVED = [case for case in OVERFLOWS if case["name"] != "anthropic"]


@pytest.fixture(autouse=True)
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    asked: list[float] = []
    monkeypatch.setattr(execution, "time", types.SimpleNamespace(sleep=asked.append))
    monkeypatch.setattr(client, "pause", asked.append)
    return asked


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    with ReplayServer() as fake:
        yield fake


def lm_for(server: ReplayServer, **table: Any) -> Any:
    base = {"kind": "openai_compatible", "model": "served-model", "api_base": server.api_base, "cache": False}
    return build_lm(parse_backbone({**base, "num_retries": 2, **table}))


@pytest.mark.parametrize("case", OVERFLOWS, ids=[case["name"] for case in OVERFLOWS])
def test_every_providers_overflow_body_names_its_window(case: dict[str, Any]) -> None:
    error = case["body"].get("error", case["body"])
    found = read_overflow(error["message"], case["body"])
    assert found is not None
    assert (found.limit, found.prompt_tokens) == (case["limit"], case["prompt_tokens"])


@pytest.mark.parametrize(
    "message",
    [
        "Rate limit reached for requests",
        "The model `gpt-9` does not exist.",
        "'max_tokens' must be at least 1, got 0.",
        "Incorrect API key provided.",
    ],
)
def test_other_refusals_are_not_overflows(message: str) -> None:
    assert read_overflow(message) is None


@pytest.mark.parametrize("case", SERVED, ids=[case["name"] for case in SERVED])
def test_each_servers_400_is_an_overflow_and_teaches_the_window(server: ReplayServer, case: dict[str, Any]) -> None:
    """Before: only OpenAI's code was an overflow; vLLM's, SGLang's and llama-server's 400s were plain invalid
    requests (scored as answers), and vLLM's top-level body lost its message."""
    server.chat = [Reply(case["status"], case["body"])]
    lm = lm_for(server)
    with count_retries() as retries, pytest.raises(ContextOverflowError) as raised:
        lm("hi")
    assert (raised.value.limit, raised.value.prompt_tokens) == (case["limit"], case["prompt_tokens"])
    assert str(case["limit"]) in str(raised.value)  # the server's sentence is kept
    assert len(server.chat_requests()) == 1  # never retried as it was sent
    assert retries.total == 0
    assert lm.context_window == case["limit"]  # learned for the rest of the run
    assert lm.window().source == "error"
    assert classify(raised.value) == "overflow"


def test_the_vllm_top_level_error_keeps_its_message(server: ReplayServer) -> None:
    body = {"object": "error", "message": "'temperature' must be between 0 and 2.", "type": "BadRequestError"}
    server.chat = [Reply(400, {**body, "param": None, "code": 400})]
    with pytest.raises(dspy.LMInvalidRequestError, match="must be between 0 and 2") as raised:
        lm_for(server)("hi")
    assert classify(raised.value) == "deterministic"


@pytest.mark.parametrize("case", REPLIES["malformed_200"], ids=[c["name"] for c in REPLIES["malformed_200"]])
def test_a_200_that_is_no_reply_is_retried_then_answered(
    server: ReplayServer, waits: list[float], case: dict[str, Any]
) -> None:
    server.chat = [Reply(200, text=case["text"], content_type=case["content_type"])]
    lm = lm_for(server)
    with count_retries() as retries:
        assert "measles" in lm("hi")[0]
    assert len(server.chat_requests()) == 2
    assert retries.total == 1
    assert len(waits) == 1


def test_a_200_that_stays_no_reply_is_transient_after_the_retries(server: ReplayServer) -> None:
    garbage = REPLIES["malformed_200"][0]
    server.chat = [Reply(200, text=garbage["text"])] * 5
    with count_retries() as retries, pytest.raises(dspy.LMError) as raised:
        lm_for(server, num_retries=2)("hi")
    assert classify(raised.value) == "transient"
    assert retries.total == 2
    assert len(server.chat_requests()) == 3


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (dspy.LMRateLimitError("slow down", status=429), "transient"),
        (dspy.LMServerError("boom", status=503), "transient"),
        (dspy.LMTimeoutError("slow"), "transient"),
        (dspy.LMTransportError("refused"), "transient"),
        (dspy.LMProviderError("the reply (HTTP 200) is not JSON", status=200), "transient"),
        (dspy.ContextWindowExceededError(message="too long"), "overflow"),
        (
            dspy.LMInvalidRequestError("request (9000 tokens) exceeds the available context size", status=400),
            "overflow",
        ),
        (dspy.LMInvalidRequestError("bad request", status=400), "deterministic"),
        (FatalServiceError("main backbone m", "auth"), "fatal"),
    ],
)
def test_the_classification_table(error: BaseException, kind: str) -> None:
    assert classify(error) == kind


def test_the_async_call_follows_the_same_policy(server: ReplayServer, waits: list[float]) -> None:
    import asyncio

    llama = next(case for case in OVERFLOWS if case["name"] == "llama_server")
    server.chat = [Reply(503, {"error": {"message": "overloaded", "type": "server_error"}}), Reply(400, llama["body"])]
    lm = lm_for(server)
    with count_retries() as retries, pytest.raises(ContextOverflowError):
        asyncio.run(lm.acall("hi"))
    assert retries.total == 1  # the 503 retried once, the overflow not at all
    assert lm.context_window == llama["limit"]
