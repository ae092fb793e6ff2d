"""The base of the fake HTTP services the tests stand up (Tavily, an OpenAI-compatible server, the hub)."""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHTTPServer(ThreadingHTTPServer):
    """A threaded HTTP server for fake APIs in tests. Timeout cases hang up on purpose: a client that went away
    is expected, not an error to print into the test output."""

    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class JsonHandler(BaseHTTPRequestHandler):
    """Base request handler of the fake APIs: JSON replies, and no request log in the test output."""

    def send_json(self, status: int, payload: object) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: object) -> None:
        pass
