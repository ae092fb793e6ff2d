"""llama.cpp's OpenAI-compatible server as the stand-in for vLLM, and a throttling proxy in front of it.

`LlamaServer` runs ``python -m llama_cpp.server`` (llama-cpp-python's ``server`` extra) on 127.0.0.1 with the
embedded model: real HTTP, a real chat template, a real context limit. `ThrottlingProxy` sits between the client and
the server and plays the provider's bad days, which no local server does on demand: HTTP 429 with ``Retry-After`` on a
fixed share of requests, or 401 on every request (a revoked key). Both are context managers; a test module turns them
into fixtures (see test_llama_server.py). The server loads a 1.1 GB model: use it from tests marked ``slow``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Literal

import requests

from clearmed.backbones.config import parse_backbone
from clearmed.backbones.model_files import PACKAGED_MODELS, resolve_model_path
from clearmed.testing import QuietHTTPServer

SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")
MODEL_ALIAS = "qwen2.5-coder-1.5b"


def llama_server_available() -> bool:
    """llama-cpp-python with its ``server`` extra, and the packaged model's parts (the ``embedded`` extra)."""
    parts = PACKAGED_MODELS["qwen2.5-coder-1.5b-instruct-q4_k_m"].part_modules
    return all(importlib.util.find_spec(name) is not None for name in (*SERVER_MODULES, *parts))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LlamaServer:
    """``python -m llama_cpp.server`` with the packaged model, an ``n_ctx``-token context, on 127.0.0.1 (niced)."""

    def __init__(self, *, n_ctx: int = 8192, n_threads: int = 2, startup_timeout: float = 600.0) -> None:
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.startup_timeout = startup_timeout
        self.port = free_port()
        self.api_base = f"http://127.0.0.1:{self.port}/v1"
        self.model = MODEL_ALIAS
        self.log_path: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LlamaServer:
        model_path = resolve_model_path(parse_backbone({"kind": "embedded", "model": MODEL_ALIAS}))
        command = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model_path),
            "--model_alias",
            MODEL_ALIAS,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
        ]
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"llama-server-{self.port}.log"
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                ["nice", "-n", "10", *command], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"llama.cpp server exited with {self._process.returncode}; log: {self.log_path}")
            try:
                if requests.get(f"{self.api_base}/models", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(1.0)
        self.__exit__()
        raise RuntimeError(f"llama.cpp server did not start within {self.startup_timeout:g} s; log: {self.log_path}")

    def __exit__(self, *exc: object) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None


ProxyMode = Literal["pass", "throttle", "unauthorized"]

# What OpenAI answers, which is what clients classify by.
RATE_LIMITED = {
    "error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}
}
UNAUTHORIZED = {
    "error": {"message": "Incorrect API key provided.", "type": "invalid_request_error", "code": "invalid_api_key"}
}


class ThrottlingProxy:
    """An in-process HTTP proxy to ``upstream`` (an ``.../v1`` base) whose behaviour tests switch:

    - ``pass``: every request forwarded;
    - ``throttle``: every ``throttle_every``-th request (the 1st, then every k-th after it) answered
      ``429`` with ``Retry-After: retry_after``, the others forwarded;
    - ``unauthorized``: every request answered ``401`` with OpenAI's invalid-key body.
    """

    def __init__(self, upstream: str, *, throttle_every: int = 3, retry_after: str = "1") -> None:
        self.upstream = upstream.rstrip("/")
        self.mode: ProxyMode = "pass"
        self.throttle_every = throttle_every
        self.retry_after = retry_after
        self.seen = 0
        self.forwarded = 0
        self.throttled = 0
        self.refused = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner._handle(self, None)

            def do_POST(self) -> None:
                owner._handle(self, self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def log_message(self, format: str, *args: object) -> None:  # keep pytest output clean
                pass

        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.api_base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _verdict(self) -> ProxyMode:
        with self._lock:
            number = self.seen
            self.seen += 1
            if self.mode == "unauthorized":
                self.refused += 1
                return "unauthorized"
            if self.mode == "throttle" and number % self.throttle_every == 0:
                self.throttled += 1
                return "throttle"
            self.forwarded += 1
            return "pass"

    def _handle(self, handler: BaseHTTPRequestHandler, body: bytes | None) -> None:
        verdict = self._verdict()
        if verdict != "pass":
            status, payload = (401, UNAUTHORIZED) if verdict == "unauthorized" else (429, RATE_LIMITED)
            headers = {"Retry-After": self.retry_after} if status == 429 else {}
            _reply(handler, status, json.dumps(payload).encode(), headers)
            return
        # The OpenAI routes live under /v1; a server's own (/props, /tokenize, /extras/...) at its root.
        root = self.upstream.removesuffix("/v1")
        url = self.upstream + handler.path[3:] if handler.path.startswith("/v1") else root + handler.path
        headers = {"Content-Type": handler.headers.get("Content-Type", "application/json")}
        try:
            upstream = requests.request("GET" if body is None else "POST", url, data=body, headers=headers, timeout=900)
        except requests.RequestException as exc:
            _reply(handler, 502, json.dumps({"error": {"message": type(exc).__name__}}).encode(), {})
            return
        _reply(
            handler, upstream.status_code, upstream.content, {"Content-Type": upstream.headers.get("Content-Type", "")}
        )

    def __enter__(self) -> ThrottlingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _reply(handler: BaseHTTPRequestHandler, status: int, raw: bytes, headers: dict[str, str]) -> None:
    handler.send_response(status)
    handler.send_header("Content-Length", str(len(raw)))
    if "Content-Type" not in headers:
        handler.send_header("Content-Type", "application/json")
    for name, value in headers.items():
        if value:
            handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(raw)
