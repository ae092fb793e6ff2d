"""What one LM call owes its endpoint (issue 58 items 1, 3, 8, 9), on every engine path, over real HTTP (fake servers
on 127.0.0.1, closed ports):

- no layer under clearmed's policy retries: with ``num_retries = 0`` a server sees one request per call and a closed
  port one connection attempt, on DSPy's native engine and on its LiteLLM engine (the openai SDK's ``max_retries``
  defaults to 2), sync and async;
- a refused connection is a refusal even when the attempt's deadline passed before it came (the first call's setup
  spent a 2 s timeout, and every question of the packaged vLLM config was recorded as a timeout);
- a 200 without a completion is retried on each engine path: native, LiteLLM, the embedded llama.cpp engine;
- a cached reply is its endpoint's: two servers of one model name never share one, and a cache hit marks no endpoint
  reached, so a refusal after it still stops the run.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
import types
from collections.abc import Iterator
from typing import Any

import dspy
import pytest
from dspy.clients import execution

from clearmed.backbones import client
from clearmed.backbones.config import parse_backbone
from clearmed.backbones.embedded import AsyncLlamaCppEngine, LlamaCppEngine
from clearmed.backbones.endpoint_cache import cache_endpoint
from clearmed.backbones.failures import EmptyReplyError
from clearmed.backbones.llama_runtime import LlamaLoadArgs
from clearmed.core.endpoints import forget_reached, has_reached
from clearmed.core.errors import FatalServiceError
from clearmed.core.retries import count_retries

from ..reliability.fakes import FakeOpenAI  # noqa: TID252
from .conftest import FakeLlama, FakeLoader
from .fake_openai import ScriptedOpenAI

# The native engine, and DSPy's LiteLLM engine (taken for options the native one cannot carry, as the packaged vLLM
# config's chat_template_kwargs).
ENGINES = {"native": {}, "litellm": {"extra": {"chat_template_kwargs": {"enable_thinking": False}}}}
PROMPT = "Which virus causes Koplik spots?"
# What `FakeOpenAI` answers a prompt that is no CLEAR stage's.
REPLY = "I cannot tell which stage this is."


@pytest.fixture(autouse=True)
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits between retries (clearmed's, and DSPy's should it ever retry itself), recorded instead of slept."""
    asked: list[float] = []
    monkeypatch.setattr(execution, "time", types.SimpleNamespace(sleep=asked.append))
    monkeypatch.setattr(client, "pause", asked.append)
    return asked


@pytest.fixture
def memory_cache() -> Iterator[None]:
    """DSPy's in-memory cache on, as in a real process (the test session runs with every cache off)."""
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)
    yield
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)


def build(api_base: str, engine: str = "native", **table: Any) -> Any:
    from clearmed.backbones.factory import build_lm

    spec = {"kind": "openai_compatible", "model": "served-model", "api_base": api_base, "cache": False}
    return build_lm(parse_backbone({**spec, "num_retries": 0, **ENGINES[engine], **table}))


def call(lm: Any, mode: str, prompt: str = PROMPT) -> Any:
    if mode == "async":
        return asyncio.run(lm.acall(prompt))
    return lm(prompt)


class ConnectCounter:
    """Connection attempts to one port (Python's ``socket.connect`` audit event; hooks cannot be removed, so one
    hook for the session reads whichever counter is current)."""

    current: ConnectCounter | None = None
    hooked = False

    def __init__(self, port: int) -> None:
        self.port = port
        self.count = 0

    def __enter__(self) -> ConnectCounter:
        if not ConnectCounter.hooked:
            sys.addaudithook(_count_connect)
            ConnectCounter.hooked = True
        ConnectCounter.current = self
        return self

    def __exit__(self, *exc: object) -> None:
        ConnectCounter.current = None


def _count_connect(event: str, args: tuple[Any, ...]) -> None:
    counter = ConnectCounter.current
    if counter is None or event != "socket.connect":
        return
    address = args[1]
    if isinstance(address, tuple) and len(address) >= 2 and address[1] == counter.port:
        counter.count += 1


# ---------------------------------------------------------------------------------------- no retries underneath


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("engine", list(ENGINES))
def test_with_no_retries_a_busy_server_sees_one_request_per_call(engine: str, mode: str) -> None:
    """The openai SDK under LiteLLM retries a 503 twice by default, DSPy its own ``num_retries``: neither may, so
    ``num_retries`` is the whole count of requests (kills: DSPy handed the LM's ``num_retries``)."""
    with FakeOpenAI() as server:
        server.inject("503", times=None)
        with pytest.raises(dspy.LMServerError):
            call(build(server.api_base, engine), mode)
        assert server.chat_requests == 1
        server.chat_requests = 0
        with count_retries() as retries, pytest.raises(dspy.LMServerError):
            call(build(server.api_base, engine, num_retries=1), mode)
        assert (server.chat_requests, retries.total) == (2, 1)  # clearmed's retry, and nothing under it


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("engine", list(ENGINES))
def test_a_closed_port_is_tried_once(closed_port: int, engine: str, mode: str) -> None:
    lm = build(f"http://127.0.0.1:{closed_port}/v1", engine, num_retries=3)
    with ConnectCounter(closed_port) as connects, pytest.raises(FatalServiceError, match="refused the connection"):
        call(lm, mode)
    assert connects.count == 1


def test_clearmeds_own_requests_are_sent_once_with_no_retries(closed_port: int) -> None:
    """The scorer's, the probes' and Tavily's requests (`core.http`, on requests and urllib3): no adapter retries."""
    from clearmed.core.http import request

    with FakeOpenAI() as server:
        server.inject("503", times=None)
        body = {"model": "m", "messages": [{"role": "user", "content": PROMPT}]}
        reply = request("POST", f"{server.api_base}/chat/completions", timeout=5, body=body, retries=0)
        assert (reply.status, server.chat_requests) == (503, 1)
    url = f"http://127.0.0.1:{closed_port}/v1/chat/completions"
    with ConnectCounter(closed_port) as connects, pytest.raises(FatalServiceError, match="refused the connection"):
        request("POST", url, timeout=5, body={}, retries=0, service="main backbone")
    assert connects.count == 1


# ---------------------------------------------------------------------------------------- the deadline


def test_a_refusal_that_comes_after_the_deadline_is_still_a_refusal(
    closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection refused only after the attempt's deadline passed (a slow network's late reset). Before: an
    `LMTimeoutError` (transient: a degraded question, exit 4, the endpoint never named)."""
    connect = socket.socket.connect

    def slow_connect(self: socket.socket, address: Any) -> None:
        sys.audit("socket.connect", self, address)  # the attempt's first socket: its deadline runs from here
        time.sleep(0.4)
        connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", slow_connect)
    lm = build(f"http://127.0.0.1:{closed_port}/v1", timeout=0.2)
    with pytest.raises(FatalServiceError) as info:
        lm(PROMPT)
    assert info.value.cause == "unreachable"
    assert f"http://127.0.0.1:{closed_port} refused the connection before any reply" in str(info.value)


def test_the_deadline_runs_from_the_first_socket_not_from_the_clients_setup(
    closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attempt's setup before any socket (DSPy importing LiteLLM on its first call: seconds of CPU) outlasts a
    short timeout; the server's refusal then is still a refusal, and a live server's reply is still a reply."""
    select = execution._select_engine

    def slow_select(*args: Any, **kwargs: Any) -> Any:
        time.sleep(1.5)
        return select(*args, **kwargs)

    monkeypatch.setattr(execution, "_select_engine", slow_select)
    with FakeOpenAI() as server:
        assert build(server.api_base, timeout=1.0)(PROMPT) == [REPLY]
    with pytest.raises(FatalServiceError, match="refused the connection before any reply"):
        build(f"http://127.0.0.1:{closed_port}/v1", timeout=1.0)(PROMPT)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_server_that_never_answers_is_named_in_the_timeout(mode: str) -> None:
    with FakeOpenAI(hang_s=2.0) as server:
        server.inject("timeout", times=None)
        port = server.api_base.split(":")[2].split("/")[0]
        with pytest.raises(dspy.LMTimeoutError) as info:
            call(build(server.api_base, timeout=0.3), mode)
    assert str(info.value).endswith(f"no complete reply within 0.3 s from http://127.0.0.1:{port}")


# ---------------------------------------------------------------------------------------- empty replies


@pytest.mark.parametrize("fault", ["empty_choices", "null_content"])
def test_an_empty_200_on_the_litellm_engine_is_retried(fault: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """LiteLLM hands DSPy an empty completion as it came: `ClearmedLM._replied` alone refuses it (kills: that check
    bypassed, the empty text reaches the adapter as the answer)."""
    with FakeOpenAI() as server:
        server.inject(fault, times=1)
        lm = build(server.api_base, "litellm", num_retries=1)
        with count_retries() as retries:
            outputs = lm(PROMPT)
        assert outputs == [REPLY]
        assert (server.served[fault], server.served["ok"], retries.total) == (1, 1, 1)
        server.inject(fault, times=1)
        with pytest.raises(EmptyReplyError):
            build(server.api_base, "litellm")(PROMPT)


@pytest.mark.parametrize("fault", ["empty_choices", "null_content"])
def test_an_empty_200_on_the_native_engine_is_retried_and_never_cached(fault: str, memory_cache: None) -> None:
    """The native engine refuses an empty completion before DSPy caches it (`failures.install_error_shapes`), so
    the retry's reply is the one cached (kills: that refusal bypassed; `_replied` then still retries, but the empty
    reply stays cached and the next same call asks the server again)."""
    with FakeOpenAI() as server:
        server.inject(fault, times=1)
        lm = build(server.api_base, num_retries=1, cache=True)
        assert lm(PROMPT) == [REPLY]
        assert lm(PROMPT) == [REPLY]
        assert (server.served[fault], server.served["ok"]) == (1, 1)  # the second call: from the cache


class _Scripted(FakeLlama):
    """llama.cpp replies from a script: a completion dict each, then the fake's normal reply."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        super().__init__()
        self.script = script

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        reply = super().create_chat_completion(**kwargs)
        return self.script.pop(0) if self.script else reply


@pytest.mark.parametrize(
    "empty",
    [
        {"id": "x", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 0}},
        {"id": "x", "choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "stop"}]},
    ],
    ids=["empty_choices", "null_content"],
)
def test_an_empty_completion_of_the_embedded_engine_is_retried(empty: dict[str, Any]) -> None:
    """Kills: `_replied` bypassed (the empty text is the answer), and an empty ``choices`` list raised as an internal
    IndexError (a deterministic failure, never retried)."""
    llm = _Scripted([empty])
    engine = LlamaCppEngine(
        LlamaLoadArgs(model_path="/models/fake.gguf", n_ctx=2048, n_threads=2, seed=7),
        model_name="fake-coder",
        loader=FakeLoader(llm),
    )
    lm = client.ClearmedLM("local/fake-coder", engine=engine, async_engine=AsyncLlamaCppEngine(engine), cache=False,
                           num_retries=1)  # fmt: skip
    with count_retries() as retries:
        outputs = lm(PROMPT)
    assert "Paris" in str(outputs)
    assert (len(llm.calls), retries.total) == (2, 1)
    llm.script = [empty]
    lm.max_retries = 0
    with pytest.raises(EmptyReplyError):
        lm(PROMPT)


# ---------------------------------------------------------------------------------------- the cache and endpoints


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("engine", list(ENGINES))
def test_a_cached_reply_never_crosses_endpoints(engine: str, mode: str, memory_cache: None) -> None:
    """One model name on two servers: the second is asked, and answers with its own reply. Before: the first
    server's reply, from the cache (DSPy's key leaves ``api_base`` out)."""
    with ScriptedOpenAI("the first server") as first, ScriptedOpenAI("the second server") as second:
        assert call(build(first.api_base, engine, cache=True), mode) == ["the first server"]
        assert call(build(second.api_base, engine, cache=True), mode) == ["the second server"]
        assert (len(first.requests), len(second.requests)) == (1, 1)
        # The same endpoint is still a cache hit.
        assert call(build(first.api_base, engine, cache=True), mode) == ["the first server"]
        assert len(first.requests) == 1


def test_the_endpoint_in_a_key_is_the_address_without_credentials_or_query() -> None:
    lm = types.SimpleNamespace(kwargs={"api_base": "http://user:sk-secret@10.0.0.5:8000/gw/v1/?x=1"})
    assert cache_endpoint(lm) == "http://10.0.0.5:8000/gw/v1"
    assert cache_endpoint(types.SimpleNamespace(kwargs={})) is None  # a provider's default address


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_cache_hit_marks_no_endpoint_reached(closed_port: int, mode: str, memory_cache: None) -> None:
    """A run resumed on a warm cache, its server gone: a hit, then a refusal, is the unreachable line. Before: the hit
    marked the endpoint reached and the refusal was retried as a restarting server's (degraded questions, exit 4)."""
    with FakeOpenAI() as server:
        api_base = server.api_base
        call(build(api_base, cache=True), mode)
    forget_reached()  # a new run
    lm = build(api_base, cache=True)
    assert call(lm, mode) == [REPLY]  # served from the cache
    assert not has_reached(api_base)
    other = "Which virus causes rubella?"
    with pytest.raises(FatalServiceError, match="refused the connection before any reply"):
        call(lm, mode, other)


def test_a_reply_from_the_server_marks_it_reached() -> None:
    with FakeOpenAI() as server:
        call(build(server.api_base), "sync")
        assert has_reached(server.api_base)


def test_an_empty_reply_from_the_cache_marks_no_endpoint_reached(memory_cache: None) -> None:
    """A cached empty completion (kept by an engine that let one through) is refused and asked of the server anew;
    it was no reply from the server, so a refusal then is still the unreachable line (kills: the 200 status of the
    refused cached reply taken as the server's answer)."""
    with FakeOpenAI() as server:
        api_base = server.api_base
        assert build(api_base, cache=True)(PROMPT) == [REPLY]
    (key, entry), *_ = dspy.cache.memory_cache.items()
    blank = {**entry, "outputs": [""], "responses": []}
    dspy.cache.memory_cache[key] = blank
    forget_reached()
    with pytest.raises(FatalServiceError, match="refused the connection before any reply"):
        build(api_base, cache=True, num_retries=1)(PROMPT)


def test_a_scored_answers_cache_key_holds_the_endpoint() -> None:
    """The scored path keys its own cache entries (`programs.pathways.scored_answer`): one model name on two servers
    gives two keys, one server one key."""
    from clearmed.programs.pathways.scored_answer import _cache_request
    from clearmed.signatures.records import Question

    question = Question(id="q", text="Koplik spots?", options={"A": "measles", "B": "rubella"}, gold_letters=["A"])
    messages = [{"role": "user", "content": PROMPT}]

    def key(api_base: str) -> dict[str, object]:
        return _cache_request(build(api_base), messages, "[[ ## answer ## ]]\n", question)

    assert key("http://10.0.0.1:8000/v1") != key("http://10.0.0.2:8000/v1")
    assert key("http://10.0.0.1:8000/v1") == key("http://10.0.0.1:8000/v1/")
