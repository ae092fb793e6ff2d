"""A real OpenAI-compatible server: llama.cpp's (8,192-token context, the embedded model) behind a throttling proxy.

An LM built by `build_lm` for an ``openai_compatible`` config finishes every call clean through a burst of 429s, with
the retries counted, and stops with one line on a 401. Slow: the server loads the 1.1 GB model and runs it on CPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import dspy
import pytest

from clearmed.backbones.config import parse_backbone
from clearmed.backbones.context_window import context_window, served_context_window
from clearmed.backbones.factory import build_lm
from clearmed.core.errors import FatalServiceError
from clearmed.core.retries import RetryTally, count_retries

from .llama_server import LlamaServer, ThrottlingProxy, llama_server_available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not llama_server_available(), reason="needs the `server` and `embedded` extras"),
]

QUESTIONS = [
    "What is the capital of France? One word.",
    "What is the capital of Italy? One word.",
    "What is the capital of Spain? One word.",
    "What is the capital of Japan? One word.",
]


@pytest.fixture(scope="module")
def llama_server() -> Iterator[LlamaServer]:
    with LlamaServer(n_ctx=8192) as server:
        yield server


@pytest.fixture
def proxy(llama_server: LlamaServer) -> Iterator[ThrottlingProxy]:
    with ThrottlingProxy(llama_server.api_base, throttle_every=3, retry_after="1") as fronted:
        yield fronted


def remote_lm(api_base: str) -> dspy.LM:
    cfg = parse_backbone(
        {
            "kind": "openai_compatible",
            "model": "qwen2.5-coder-1.5b",
            "api_base": api_base,
            "context_window": 8192,  # llama.cpp's server does not report it (see the last test)
            "temperature": 0.0,
            "max_tokens": 32,
            "timeout": 600.0,
            "num_retries": 3,
            "cache": False,
        }
    )
    return build_lm(cfg)


def ask(lm: dspy.LM, question: str) -> tuple[str, RetryTally]:
    with count_retries() as retries, dspy.context(adapter=dspy.ChatAdapter(use_json_adapter_fallback=False)):
        answer = dspy.Predict("question -> answer")(question=question, lm=lm).answer
    return str(answer), retries


def test_calls_finish_clean_through_a_429_burst_with_the_retries_counted(proxy: ThrottlingProxy) -> None:
    lm = remote_lm(proxy.api_base)
    proxy.mode = "throttle"  # the 1st, 4th, 7th ... request: 429, Retry-After: 1
    with ThreadPoolExecutor(max_workers=2) as pool:  # concurrent callers, each counting its own retries
        results = list(pool.map(lambda q: ask(lm, q), QUESTIONS))
    answers = [answer.lower() for answer, _ in results]
    assert [any(city in answer for city in ("paris", "rome", "madrid", "tokyo")) for answer in answers] == [True] * 4
    assert proxy.throttled >= 2
    assert sum(retries.total for _, retries in results) == proxy.throttled  # every 429 retried, and counted once
    assert all(retries.waited_s >= retries.total * 1.0 for _, retries in results)  # Retry-After honoured
    assert proxy.forwarded == len(QUESTIONS)


def test_a_revoked_key_stops_with_one_line(proxy: ThrottlingProxy) -> None:
    lm = remote_lm(proxy.api_base)
    proxy.mode = "unauthorized"
    with count_retries() as retries, pytest.raises(FatalServiceError) as info:
        ask(lm, QUESTIONS[0])
    assert str(info.value) == (
        f"main backbone openai/qwen2.5-coder-1.5b at {proxy.api_base}: authentication failed (HTTP 401): "
        "Incorrect API key provided."
    )
    assert proxy.refused == 1  # never retried
    assert retries.total == 0
    proxy.mode = "pass"  # the key is fixed: the same LM answers again
    assert "paris" in ask(lm, QUESTIONS[0])[0].lower()


def test_the_server_does_not_report_its_window_so_the_config_gives_it(llama_server: LlamaServer) -> None:
    assert served_context_window(llama_server.api_base, llama_server.model) is None
    assert (
        context_window(parse_backbone({"kind": "openai_compatible", "model": "m", "api_base": llama_server.api_base}))
        is None
    )
    lm = remote_lm(llama_server.api_base)
    cfg = parse_backbone(
        {"kind": "openai_compatible", "model": "m", "api_base": llama_server.api_base, "context_window": 8192}
    )
    assert context_window(cfg, lm) == 8192
