"""A fake OpenAI-compatible server on 127.0.0.1 that answers with real servers' replies (fixtures/server_replies.json).

`ReplayServer` serves fixed replies per path (``/v1/models``, ``/props``, ``/tokenize`` ...; a list of replies is served
in order, its last one for good) and, for chat requests, a
queue of scripted replies before a default answer. A reply can be trickled a byte at a time (``trickle_s``), which an
HTTP client's idle-read timeout never trips. Every request is recorded (path, body). Threads are daemons and the
server is shut down on exit, so a test never leaves it running.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from clearmed.testing import QuietHTTPServer

REPLIES = json.loads((Path(__file__).parent / "fixtures" / "server_replies.json").read_text())
ANSWER = "[[ ## answer ## ]]\nmeasles\n\n[[ ## completed ## ]]"


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # JSON-encoded unless `text` is given
    text: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    trickle_s: float = 0.0  # seconds between bytes

    def raw(self) -> bytes:
        return (self.text if self.text is not None else json.dumps(self.body)).encode()


# A path's reply: one for good, several in order (the last one for good), or made from the request's body.
Route = Reply | list[Reply] | Callable[[dict[str, Any]], Reply]


def completion(content: str = ANSWER, prompt_tokens: int = 40) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "served-model",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 9, "total_tokens": prompt_tokens + 9},
    }


def overflow_reply(name: str) -> Reply:
    case = next(case for case in REPLIES["overflow"] if case["name"] == name)
    return Reply(case["status"], case["body"])


class ReplayServer:
    def __init__(self, routes: dict[str, Route] | None = None, *, content: str = ANSWER) -> None:
        self.routes = dict(routes or {})
        self.chat: list[Reply] = []
        self.content = content
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner._serve(self, None)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner._serve(self, json.loads(raw) if raw else {})

            def log_message(self, *args: object) -> None:
                pass

        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.root = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.api_base = self.root + "/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"].endswith("/chat/completions")]

    def _serve(self, handler: BaseHTTPRequestHandler, body: dict[str, Any] | None) -> None:
        path = handler.path.split("?")[0]
        with self._lock:
            self.requests.append({"path": path, "body": body})
            if path.endswith("/chat/completions"):
                reply = self.chat.pop(0) if self.chat else Reply(200, completion(self.content))
            else:
                route = self.routes.get(path, Reply(404, {"detail": "Not Found"}))
                # A list is served in order, its last reply for good.
                if isinstance(route, list):
                    reply = route.pop(0) if len(route) > 1 else route[0]
                else:
                    reply = route(body or {}) if callable(route) else route
        raw = reply.raw()
        try:
            handler.send_response(reply.status)
            handler.send_header("Content-Type", reply.content_type)
            handler.send_header("Content-Length", str(len(raw)))
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            if reply.trickle_s:
                for byte in raw:
                    handler.wfile.write(bytes([byte]))
                    handler.wfile.flush()
                    time.sleep(reply.trickle_s)
            else:
                handler.wfile.write(raw)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a deadline case)
            pass

    def __enter__(self) -> ReplayServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
