"""A scripted OpenAI-compatible server on 127.0.0.1: replies, HTTP errors with the bodies and headers real providers
send (OpenAI's and vLLM's error shapes, Retry-After, x-ratelimit-*), and vLLM's ``GET /v1/models`` with
``max_model_len``. For what no local component can show: a 429 burst, a revoked key, an exhausted balance."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from clearmed.testing import QuietHTTPServer

ANSWER = "[[ ## answer ## ]]\nmeasles\n\n[[ ## completed ## ]]"

Reply = tuple[int, dict[str, Any], dict[str, str]]


def openai_error(status: int, message: str, *, code: str | None = None, kind: str = "invalid_request_error") -> Reply:
    """An error as OpenAI (and vLLM >= 0.7) shape it: ``{"error": {"message", "type", "code"}}``."""
    return status, {"error": {"message": message, "type": kind, "code": code}}, {}


RATE_LIMITED = (
    429,
    {"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}},
    {"Retry-After": "1"},
)
# OpenAI answers an exhausted balance with HTTP 429 too: only the code tells it from a rate limit.
NO_QUOTA = openai_error(429, "You exceeded your current quota.", code="insufficient_quota", kind="insufficient_quota")
BAD_KEY = openai_error(401, "Incorrect API key provided.", code="invalid_api_key")
NO_MODEL = openai_error(404, "The model `gpt-9` does not exist.", code="model_not_found")
# vLLM before 0.7: the error object at the top level.
NO_MODEL_OLD_VLLM: Reply = (
    404,
    {
        "object": "error",
        "message": "The model `x` does not exist.",
        "type": "NotFoundError",
        "param": None,
        "code": 404,
    },
    {},
)


class ScriptedOpenAI:
    """Answers each POST from ``script`` (one reply each), then with ``content``; records every request."""

    def __init__(self, content: str = ANSWER, *, max_model_len: int | None = None, models: list[str] | None = None):
        self.content = content
        self.script: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.max_model_len = max_model_len
        self.models = models or ["served-model"]
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    entries = [
                        {"id": name, "object": "model", "owned_by": "vllm"}
                        | ({"max_model_len": owner.max_model_len} if owner.max_model_len else {})
                        for name in owner.models
                    ]
                    return self._send(200, {"object": "list", "data": entries}, {})
                return self._send(404, {"error": {"message": "not found"}}, {})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if owner.script:
                    return self._send(*owner.script.pop(0))
                return self._send(200, owner.completion(body), {})

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
                pass

        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.api_base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model"),
            "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": self.content}}
            ],
            "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49},
        }

    def __enter__(self) -> ScriptedOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
