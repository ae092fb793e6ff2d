"""Tokens per call: from the config, the embedded engine's n_ctx, vLLM's GET /v1/models, or the bundled map."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from clearmed.backbones import build_lm, context_window, parse_backbone, served_context_window

from .fake_openai import ScriptedOpenAI


def vllm(api_base: str, **table: Any) -> Any:
    return parse_backbone({"kind": "openai_compatible", "model": "Qwen/Qwen3.5-9B", "api_base": api_base, **table})


def test_vllm_reports_max_model_len() -> None:
    with ScriptedOpenAI(max_model_len=32768, models=["Qwen/Qwen3.5-9B"]) as server:
        assert served_context_window(server.api_base, "Qwen/Qwen3.5-9B") == 32768
        cfg = vllm(server.api_base)
        assert context_window(cfg, build_lm(cfg)) == 32768
        assert context_window(cfg) == 32768  # without the LM: the config's address, no key


def test_one_served_model_under_another_name_still_counts() -> None:
    with ScriptedOpenAI(max_model_len=8192, models=["alias"]) as server:
        assert served_context_window(server.api_base, "Qwen/Qwen3.5-9B") == 8192
    with ScriptedOpenAI(max_model_len=8192, models=["a", "b"]) as server:
        assert served_context_window(server.api_base, "Qwen/Qwen3.5-9B") is None  # which one: unknown


def test_a_server_that_does_not_say_or_cannot_be_asked_gives_none() -> None:
    with ScriptedOpenAI(models=["m"]) as server:  # llama.cpp's server and Ollama list no max_model_len
        assert served_context_window(server.api_base, "m") is None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert served_context_window(f"http://127.0.0.1:{port}/v1", "m", timeout=2) is None


def test_the_config_wins_then_the_engine_then_the_map() -> None:
    assert context_window(vllm("http://127.0.0.1:9/v1", context_window=4096)) == 4096  # no request made
    assert context_window(parse_backbone({"kind": "embedded", "model": "m", "n_ctx": 16384})) == 16384
    o3 = parse_backbone({"kind": "hosted", "model": "openai/o3-mini", "api_key_env": "K"})
    assert context_window(o3) == 200_000
    unknown = parse_backbone({"kind": "hosted", "model": "openai/no-such-model-2031", "api_key_env": "K"})
    assert context_window(unknown) is None


@pytest.mark.parametrize("key", [None, "sk-vllm-0123456789abcdef"])
def test_the_key_goes_to_the_server(key: str | None) -> None:
    import json
    import threading
    from http.server import BaseHTTPRequestHandler

    from clearmed.testing import QuietHTTPServer

    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            raw = json.dumps({"data": [{"id": "m", "max_model_len": 2048}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: object) -> None:
            pass

    server = QuietHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert served_context_window(f"http://127.0.0.1:{server.server_address[1]}/v1", "m", api_key=key) == 2048
    finally:
        server.shutdown()
        server.server_close()
    assert seen == [f"Bearer {key}" if key else None]


def test_a_built_lm_asks_the_server_on_first_use_and_remembers() -> None:
    with ScriptedOpenAI(max_model_len=32768, models=["Qwen/Qwen3.5-9B"]) as server:
        lm = build_lm(vllm(server.api_base))
        assert lm.context_window == 32768
    assert lm.context_window == 32768  # the server is gone: not asked again
    configured = build_lm(vllm("http://127.0.0.1:9/v1", context_window=4096))
    assert configured.context_window == 4096
