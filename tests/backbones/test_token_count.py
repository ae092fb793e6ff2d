"""Tokens counted the way the server counts them (issue 37): vLLM's and llama-server's ``/tokenize``,
llama-cpp-python's ``/extras/tokenize/count``; a server with neither is remembered and the estimate used."""

from __future__ import annotations

from typing import Any

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


def hosted(model: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("PROVIDER_KEY", "sk-test-0123456789")
    return parse_backbone({"kind": "hosted", "model": model, "api_key_env": "PROVIDER_KEY"})


# OpenAI's cookbook, "How to count tokens with tiktoken": num_tokens_from_string("tiktoken is great!", ...) == 6.
COOKBOOK_TEXT = "tiktoken is great!"
COOKBOOK_TOKENS = 6


@pytest.mark.parametrize("model", ["openai/gpt-4o", "openai/o3-mini", "openai/gpt-3.5-turbo"])
def test_a_hosted_openai_model_counts_with_its_own_tiktoken_encoding(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: every hosted model was estimated at 3.2 characters a token (6 here by chance, 13 for a longer text)."""
    import tiktoken

    lm = build_lm(hosted(model, monkeypatch))
    assert lm.count_tokens(COOKBOOK_TEXT) == COOKBOOK_TOKENS
    clinical = "Koplik spots, 3 days of fever (39.4 °C) and a maculopapular rash: rubeola IgM?"
    exact = len(tiktoken.encoding_for_model(model.removeprefix("openai/")).encode(clinical))
    assert lm.count_tokens(clinical) == exact
    assert exact != int(len(clinical) / 3.2) + 1  # what the estimate would have said


@pytest.mark.parametrize("model", ["anthropic/claude-3-5-sonnet-20240620", "openai/not-a-model-tiktoken-knows"])
def test_a_hosted_model_whose_tokenizer_is_not_known_here_keeps_the_estimate(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lm = build_lm(hosted(model, monkeypatch))
    assert lm.count_tokens(COOKBOOK_TEXT) is None
