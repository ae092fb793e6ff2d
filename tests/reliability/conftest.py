"""The reliability suite's bookkeeping and shared doubles.

Every case runs inside `reliability.case(category, name)`: a case that raises (an assertion or anything else)
counts as not handled, and a case may also report answers flipped by adversarial evidence, results lost after
kills, or secrets leaked into an output. At the end of the session the recorder prints one table per run, so
`pytest -m reliability` shows the figures the issue asks for (cases tried, handled, flipped, lost, leaked).

Also here: a fake OpenAI-compatible server and a fake Tavily server on 127.0.0.1, so failing models and
searches are exercised through the real HTTP clients, fully offline.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from clearmed.testing import QuietHTTPServer, ScriptedCall, format_chat_reply, identify_stage

CATEGORIES = ("bad input", "failing dependencies", "adversarial evidence", "lost work", "secrets")


# --------------------------------------------------------------------------------------------- the recorder


@dataclass
class Case:
    """One case of the suite; the test fills in what it measured before asserting on it."""

    category: str
    name: str
    handled: bool = False
    flipped: int = 0
    lost: int = 0
    leaked: int = 0
    note: str = ""


@dataclass
class Recorder:
    cases: list[Case] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @contextlib.contextmanager
    def case(self, category: str, name: str) -> Iterator[Case]:
        if category not in CATEGORIES:
            raise ValueError(f"unknown reliability category {category!r}")
        case = Case(category=category, name=name)
        with self._lock:
            self.cases.append(case)
        try:
            yield case
        except BaseException as exc:
            case.handled = False
            case.note = case.note or f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:160]
            raise
        # Flips, losses and leaks are failures even when a test forgot to assert on them.
        case.handled = not (case.flipped or case.lost or case.leaked)

    def table(self) -> list[str]:
        header = ("category", "cases tried", "handled", "answers flipped", "results lost", "secrets leaked")
        rows = []
        for category in CATEGORIES:
            cases = [c for c in self.cases if c.category == category]
            if not cases:
                continue
            handled = sum(c.handled for c in cases)
            rows.append(
                (
                    category,
                    str(len(cases)),
                    f"{handled} ({handled / len(cases):.0%})",
                    str(sum(c.flipped for c in cases)),
                    str(sum(c.lost for c in cases)),
                    str(sum(c.leaked for c in cases)),
                )
            )
        total = len(self.cases)
        handled = sum(c.handled for c in self.cases)
        rows.append(
            (
                "all",
                str(total),
                f"{handled} ({handled / total:.0%})" if total else "0",
                str(sum(c.flipped for c in self.cases)),
                str(sum(c.lost for c in self.cases)),
                str(sum(c.leaked for c in self.cases)),
            )
        )
        widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

        def line(row: tuple[str, ...]) -> str:
            return "| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) + " |"

        out = [line(header), "|" + "|".join("-" * (width + 2) for width in widths) + "|"]
        out.extend(line(row) for row in rows)
        failures = [c for c in self.cases if not c.handled]
        if failures:
            out.append("")
            out.append("not handled:")
            out.extend(f"  [{c.category}] {c.name}: {c.note}" for c in failures)
        return out


RECORDER = Recorder()


@pytest.fixture(scope="session")
def reliability() -> Recorder:
    return RECORDER


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not RECORDER.cases:
        return
    terminalreporter.write_sep("=", "reliability summary")
    for row in RECORDER.table():
        terminalreporter.write_line(row)


# --------------------------------------------------------------------------------------------- fake servers

Reply = tuple[int, dict[str, str], bytes]


def json_reply(status: int, payload: object, headers: dict[str, str] | None = None) -> Reply:
    return status, headers or {}, json.dumps(payload).encode()


def chat_completion(text: str) -> dict[str, Any]:
    """An OpenAI chat completion whose message is `text`."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _content(message: dict[str, Any]) -> str:
    value = message.get("content") or ""
    return value if isinstance(value, str) else "".join(part.get("text", "") for part in value)


class FakeServer:
    """A stdlib HTTP server on 127.0.0.1. Queued replies are served first (failures to inject), then `respond`.

    `serve_chat(script)` answers OpenAI chat requests by stage, like `clearmed.testing.ScriptedEngine`.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.queue: list[tuple[Reply, float]] = []
        self.delay = 0.0
        self.respond: Callable[[dict[str, Any]], Reply] = lambda request: json_reply(404, {"error": "not found"})
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real API servers do

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {}
                request = {"path": self.path, "body": body, "headers": dict(self.headers.items())}
                with server._lock:
                    server.requests.append(request)
                    queued = server.queue.pop(0) if server.queue else None
                reply, delay = queued if queued is not None else (server.respond(request), server.delay)
                if delay:
                    time.sleep(delay)
                status, headers, payload = reply
                try:
                    self.send_response(status)
                    for name, value in {"Content-Type": "application/json", **headers}.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout case)
                    pass

        self._server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def fail_next(self, times: int, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        with self._lock:
            self.queue.extend([(json_reply(status, payload, headers), 0.0)] * times)

    def serve(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        self.respond = lambda request: json_reply(status, payload, headers)

    def serve_chat(self, script: dict[str, Any]) -> None:
        def respond(request: dict[str, Any]) -> Reply:
            messages = request["body"].get("messages") or []
            system = "\n".join(_content(m) for m in messages if m.get("role") == "system")
            user = "\n".join(_content(m) for m in messages if m.get("role") == "user")
            stage = identify_stage(system, user)
            reply = script.get(stage)
            if callable(reply):
                reply = reply(ScriptedCall(stage=stage, system=system, user=user))
            if reply is None:
                return json_reply(500, {"error": {"message": f"no scripted reply for {stage}"}})
            return json_reply(200, chat_completion(format_chat_reply(reply)))

        self.respond = respond

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def fake_server() -> Iterator[Callable[[], FakeServer]]:
    """A factory of fake servers, all shut down after the test."""
    servers: list[FakeServer] = []

    def make() -> FakeServer:
        server = FakeServer()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (connection refused)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
