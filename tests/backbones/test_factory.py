"""build_lm for each kind of backbone; no network beyond a fake server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import dspy
import pytest

from clearmed.backbones import factory as factory_module
from clearmed.backbones.client import ClearmedLM
from clearmed.backbones.config import AnyBackbone, parse_backbone
from clearmed.backbones.embedded import LlamaCppEngine
from clearmed.backbones.errors import ConfigError
from clearmed.backbones.factory import build_lm, lm_label
from clearmed.core.endpoints import mark_reached
from clearmed.programs.lm.context import supports_concurrency
from clearmed.testing import QuietHTTPServer

from .conftest import FakeLoader

SOURCE = "configs/x.toml"
SECRET = "sk-test-0123456789abcdef"


class FakeOpenAIServer:
    """A stdlib HTTP server answering /v1/chat/completions; records every request."""

    def __init__(self, content: str) -> None:
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                payload = json.dumps(
                    {
                        "id": "chatcmpl-1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model"),
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                        ],
                        "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
                pass

        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.api_base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeOpenAIServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer("[[ ## answer ## ]]\nmeasles\n\n[[ ## completed ## ]]") as server:
        yield server


def vllm_config(api_base: str, **extra: Any) -> AnyBackbone:
    table = {
        "kind": "openai_compatible",
        "model": "Qwen/Qwen3.5-9B",
        "api_base": api_base,
        "temperature": 0.0,
        "top_p": 0.95,
        "max_tokens": 1024,
        "timeout": 300.0,
        "num_retries": 0,
        "cache": False,
        **extra,
    }
    return parse_backbone(table, source=SOURCE)


def test_openai_compatible_backbone_calls_the_server(fake_server: FakeOpenAIServer) -> None:
    lm = build_lm(vllm_config(fake_server.api_base), source=SOURCE)
    pred = dspy.Predict("question -> answer")(question="Koplik spots?", lm=lm)
    assert pred.answer == "measles"
    (request,) = fake_server.requests
    assert request["path"] == "/v1/chat/completions"
    body = request["body"]
    assert body["model"] == "Qwen/Qwen3.5-9B"
    assert body["temperature"] == 0.0
    assert body["top_p"] == 0.95
    assert body.get("max_completion_tokens", body.get("max_tokens")) == 1024
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "Koplik spots?" in body["messages"][-1]["content"]
    assert request["auth"] == "Bearer none"  # a placeholder: local servers ignore it, clients want one
    assert lm.history[-1]["usage"]["prompt_tokens"] == 40
    assert lm_label(lm) == "openai/Qwen/Qwen3.5-9B"
    assert supports_concurrency(lm) is True


def test_openai_compatible_key_comes_from_the_named_variable(
    fake_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_KEY", SECRET)
    lm = build_lm(vllm_config(fake_server.api_base, api_key_env="VLLM_KEY"))
    lm("hi")
    assert fake_server.requests[0]["auth"] == f"Bearer {SECRET}"


def test_openai_compatible_named_variable_must_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_KEY", raising=False)
    with pytest.raises(ConfigError) as info:
        build_lm(vllm_config("http://127.0.0.1:9/v1", api_key_env="VLLM_KEY"), source=SOURCE)
    assert str(info.value) == (
        "configs/x.toml: backbones.main.api_key_env: environment variable VLLM_KEY is not set or empty"
    )


def test_a_server_refusing_after_it_answered_is_a_transport_error(closed_port: int) -> None:
    """A refused connection once the endpoint has answered is a server restarting: transient (test_client.py has the
    refusal before any answer, which stops the run)."""
    base = f"http://127.0.0.1:{closed_port}/v1"
    mark_reached(base)
    lm = build_lm(vllm_config(base, num_retries=0))
    with pytest.raises(dspy.LMTransportError):
        lm("hi")


def hosted(model: str = "openai/o3-mini", env: str = "OPENAI_API_KEY", **extra: Any) -> AnyBackbone:
    return parse_backbone({"kind": "hosted", "model": model, "api_key_env": env, "timeout": 120.0, **extra})


@pytest.mark.parametrize(("model", "env"), [("openai/o3-mini", "OPENAI_API_KEY"), ("azure/o3-mini", "AZURE_API_KEY")])
def test_hosted_backbone_reads_the_key_from_the_environment(
    model: str, env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(env, SECRET)
    lm = build_lm(hosted(model, env), role="judge")
    assert lm.model == model
    assert lm.kwargs["api_key"] == SECRET
    assert lm.kwargs["timeout"] == 120.0
    assert lm_label(lm) == model
    assert supports_concurrency(lm) is True
    assert SECRET not in repr(lm)
    assert SECRET not in json.dumps(lm.dump_state(), default=str)


@pytest.mark.parametrize("value", [None, "", "   "])
def test_hosted_missing_key_names_the_variable(value: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if value is None:
        monkeypatch.delenv("AZURE_API_KEY", raising=False)
    else:
        monkeypatch.setenv("AZURE_API_KEY", value)
    with pytest.raises(ConfigError) as info:
        build_lm(hosted("azure/o3-mini", "AZURE_API_KEY"), role="assessor", source=SOURCE)
    assert str(info.value) == (
        "configs/x.toml: backbones.assessor.api_key_env: environment variable AZURE_API_KEY is not set or empty"
    )


def test_hosted_keyless_provider_gets_no_key() -> None:
    lm = build_lm(
        parse_backbone({"kind": "hosted", "model": "ollama_chat/llama3", "api_base": "http://127.0.0.1:11434"})
    )
    assert "api_key" not in lm.kwargs
    assert lm.kwargs["api_base"] == "http://127.0.0.1:11434"


def test_build_sets_the_local_cost_map(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    build_lm(hosted())
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"


def test_dspy_construction_errors_become_config_errors_without_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)

    def refuse(*args: Any, **kwargs: Any) -> dspy.LM:
        raise ValueError(f"bad client settings for key {kwargs['api_key']}")

    monkeypatch.setattr(factory_module, "ClearmedLM", refuse)
    with pytest.raises(ConfigError) as info:
        build_lm(hosted(), source=SOURCE)
    assert str(info.value) == "configs/x.toml: backbones.main.model: bad client settings for key ***"


def test_embedded_backbone_uses_the_llama_engine(fake_gguf: Path, fake_loader: FakeLoader) -> None:
    cfg = parse_backbone(
        {"kind": "embedded", "model": "qwen-coder", "model_path": str(fake_gguf), "n_ctx": 4096, "n_threads": 2}
        | {"temperature": 0.0, "max_tokens": 256, "cache": False, "num_retries": 0}
    )
    lm = build_lm(cfg, llama_loader=fake_loader)
    assert isinstance(lm.engine, LlamaCppEngine)
    assert lm.engine.load_args.model_path == str(fake_gguf.resolve())
    assert (lm.engine.load_args.n_ctx, lm.engine.load_args.n_threads) == (4096, 2)
    assert lm_label(lm) == "local/qwen-coder"
    assert supports_concurrency(lm) is False
    assert fake_loader.loads == []  # lazy: nothing loaded until the first call
    assert dspy.Predict("question -> answer")(question="q", lm=lm).answer == "Paris"
    assert fake_loader.llm.calls[0]["max_tokens"] == 256


def test_embedded_missing_model_path_names_file_and_field(tmp_path: Path, fake_loader: FakeLoader) -> None:
    cfg = parse_backbone({"kind": "embedded", "model": "m", "model_path": str(tmp_path / "gone.gguf")})
    with pytest.raises(ConfigError) as info:
        build_lm(cfg, role="assessor", source=SOURCE, llama_loader=fake_loader)
    assert str(info.value) == f"configs/x.toml: backbones.assessor.model_path: no such file: {tmp_path / 'gone.gguf'}"


def test_embedded_without_llama_cpp_says_which_extra(fake_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(factory_module, "llama_cpp_available", lambda: False)
    cfg = parse_backbone({"kind": "embedded", "model": "m", "model_path": str(fake_gguf)})
    with pytest.raises(ConfigError, match=r"^configs/x\.toml: backbones\.main\.kind: .*'clearmed\[embedded\]'"):
        build_lm(cfg, source=SOURCE)


def test_supports_concurrency_for_test_doubles() -> None:
    assert supports_concurrency(dspy.utils.DummyLM([{"answer": "x"}])) is True


def test_every_backbone_is_a_clearmed_lm_named_for_its_role(
    fake_server: FakeOpenAIServer, fake_gguf: Path, fake_loader: FakeLoader, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    remote = build_lm(vllm_config(fake_server.api_base), role="assessor")
    hosted_lm = build_lm(hosted())
    local = build_lm(
        parse_backbone({"kind": "embedded", "model": "m", "model_path": str(fake_gguf)}), llama_loader=fake_loader
    )
    assert all(isinstance(lm, ClearmedLM) for lm in (remote, hosted_lm, local))
    assert remote.service == f"assessor backbone openai/Qwen/Qwen3.5-9B at {fake_server.api_base}"
    assert hosted_lm.service == "main backbone openai/o3-mini"
    copied = remote.copy()
    assert isinstance(copied, ClearmedLM)
    assert copied.service == remote.service


def test_provider_options_become_lm_keyword_arguments(fake_server: FakeOpenAIServer) -> None:
    options = {"chat_template_kwargs": {"enable_thinking": False}}
    cfg = vllm_config(fake_server.api_base, reasoning_effort="high", extra=options)
    lm = build_lm(cfg)
    assert lm.kwargs["reasoning_effort"] == "high"
    assert lm.kwargs["chat_template_kwargs"] == {"enable_thinking": False}
    lm.kwargs["chat_template_kwargs"]["enable_thinking"] = True
    assert cfg.extra == options  # the frozen config is not changed through the LM


def test_a_reasoning_backbone_gets_room_to_think(
    fake_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    thinker = build_lm(
        parse_backbone({"kind": "openai_compatible", "model": "q", "api_base": fake_server.api_base, "reasoning": True})
    )
    assert (thinker.kwargs["max_tokens"], thinker.min_output_tokens) == (8192, 8192)
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    o3 = build_lm(hosted())
    assert o3.min_output_tokens == 16000  # OpenAI counts reasoning tokens against the output budget
    plain = build_lm(vllm_config(fake_server.api_base))
    assert plain.min_output_tokens is None
