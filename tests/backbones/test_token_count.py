"""Tokens counted the way the server counts them (issue 37): vLLM's and llama-server's ``/tokenize``,
llama-cpp-python's ``/extras/tokenize/count``; a server with neither is remembered and the estimate used."""

from __future__ import annotations

import pytest

from clearmed.backbones.config import parse_backbone
from clearmed.backbones.factory import build_lm
from clearmed.backbones.token_count import ServerTokenCounter

from .replay_server import REPLIES, ReplayServer, Reply

TOKENIZE = REPLIES["tokenize"]


@pytest.mark.parametrize("name", ["vllm", "llama_server", "llama_cpp_python"])
def test_each_servers_tokenizer_is_found_and_remembered(name: str) -> None:
    case = TOKENIZE[name]
    with ReplayServer({case["path"]: Reply(200, case["body"])}) as server:
        counter = ServerTokenCounter(server.api_base, "served-model", None)
        assert counter.count("What causes Koplik spots?") == 7
        asked = len(server.requests)
        assert counter.count("again") == 7
        assert len(server.requests) == asked + 1  # the endpoint that answered is asked directly
    body = server.requests[0]["body"]
    assert body["model"] == "served-model"
    if case["path"] == "/tokenize":  # one body for vLLM ("prompt") and llama-server ("content")
        assert body["prompt"] == body["content"] == "What causes Koplik spots?"


def test_a_server_without_a_tokenizer_is_asked_once_then_estimated() -> None:
    with ReplayServer() as server:  # 404 everywhere, like OpenAI or Ollama
        counter = ServerTokenCounter(server.api_base, "m", None)
        assert counter.count("text") is None
        asked = len(server.requests)
        assert counter.count("more text") is None
        assert len(server.requests) == asked
    assert counter.available is False


def test_an_empty_tokens_list_is_not_a_count() -> None:
    """llama-server answers a body without "content" with no tokens: never read as a 0-token prompt."""
    with ReplayServer({"/tokenize": Reply(200, {"tokens": []})}) as server:
        assert ServerTokenCounter(server.api_base, "m", None).count("some text") is None


def test_the_lm_counts_with_its_server() -> None:
    case = TOKENIZE["vllm"]
    with ReplayServer({case["path"]: Reply(200, case["body"])}) as server:
        table = {"kind": "openai_compatible", "model": "served-model", "api_base": server.api_base}
        assert build_lm(parse_backbone(table)).count_tokens("What causes Koplik spots?") == 7
    hosted = build_lm(parse_backbone({"kind": "hosted", "model": "ollama_chat/llama3"}))
    assert hosted.count_tokens("text") is None  # no server tokenizer to ask: the estimate
