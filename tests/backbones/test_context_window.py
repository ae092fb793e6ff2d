"""Tokens per call: from the config, the embedded engine's n_ctx, the server (vLLM's and SGLang's GET /v1/models,
llama-server's GET /props), or the bundled map; unknown when nothing says, asked again when the server could not be."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from clearmed.backbones.config import parse_backbone
from clearmed.backbones.context_window import context_window, served_context_window, served_window
from clearmed.backbones.factory import build_lm
from clearmed.core import http as http_client
from clearmed.core.retries import count_retries

from .fake_openai import ScriptedOpenAI
from .replay_server import REPLIES, ReplayServer, Reply


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


# ---- issue 37: every server's own report, read from its real reply (fixtures/server_replies.json) ----

WINDOWS = REPLIES["windows"]


def replay(*names: str) -> ReplayServer:
    return ReplayServer({WINDOWS[name]["path"]: Reply(200, WINDOWS[name]["body"]) for name in names})


def test_llama_servers_window_is_read_from_props_not_from_the_training_length() -> None:
    with replay("llama_server_models", "llama_server_props") as server:
        found = served_window(server.api_base, "qwen2.5-coder-1.5b")
    assert (found.tokens, found.source, found.detail) == (8192, "server", "GET /props n_ctx")
    assert WINDOWS["llama_server_models"]["body"]["data"][0]["meta"]["n_ctx_train"] == 32768  # listed, never read


@pytest.mark.parametrize(("name", "window"), [("vllm_models", 32768), ("sglang_models", 8192)])
def test_vllm_and_sglang_report_max_model_len(name: str, window: int) -> None:
    with replay(name, "sglang_get_model_info") as server:
        found = served_window(server.api_base, "Qwen/Qwen3.5-9B")
        assert (found.tokens, found.detail) == (window, "GET /v1/models max_model_len")
        assert [r["path"] for r in server.requests] == ["/v1/models"]  # nothing else asked


def test_sglangs_model_info_names_no_window_so_v1_models_is_what_counts() -> None:
    info = WINDOWS["sglang_get_model_info"]["body"]
    assert not {"context_length", "max_model_len", "n_ctx"} & set(info)


def test_llama_cpp_pythons_server_reports_nothing_and_that_is_settled() -> None:
    with replay("llama_cpp_python_models") as server:
        found = served_window(server.api_base, "qwen2.5-coder-1.5b")
        assert (found.tokens, found.source, found.settled) == (None, "unknown", True)
        cfg = vllm(server.api_base)
        lm = build_lm(cfg)
        assert lm.context_window is None
        asked = len(server.requests)
        assert lm.context_window is None
        assert len(server.requests) == asked  # a settled "unknown" is not asked again


def test_a_server_down_at_the_first_call_is_asked_again_later(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31 item 9: the window was cached as None for the rest of the run when the first ask failed."""
    monkeypatch.setattr(http_client, "pause", lambda seconds: None)
    busy = [Reply(503, {"error": {"message": "loading model"}})] * 4
    with ReplayServer({"/v1/models": [*busy, Reply(200, WINDOWS["vllm_models"]["body"])]}) as server:
        lm = build_lm(vllm(server.api_base))
        assert lm.context_window is None  # four 503s: the probe's retries spent, so unsettled
        assert lm.context_window == 32768  # the server answers now: asked again, and kept
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    refused = served_window(f"http://127.0.0.1:{port}/v1", "m", timeout=2)
    assert (refused.tokens, refused.settled) == (None, False)


def test_a_throttled_window_probe_is_retried_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    waited: list[float] = []
    monkeypatch.setattr(http_client, "pause", waited.append)
    throttled = Reply(429, {"error": {"message": "Rate limit reached"}}, headers={"Retry-After": "1"})
    routes = {"/v1/models": [throttled, Reply(200, WINDOWS["vllm_models"]["body"])]}
    with ReplayServer(routes) as server, count_retries() as retries:
        assert served_context_window(server.api_base, "Qwen/Qwen3.5-9B") == 32768
    assert retries.by_service == {"lm": 1}
    assert len(waited) == 1
    assert 1.0 <= waited[0] <= 2.0
