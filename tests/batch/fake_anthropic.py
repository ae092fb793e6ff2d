"""A fake of Anthropic's Messages API and Message Batches API, on 127.0.0.1 only, answering with the gold.

``FakeBatchAnthropic`` answers ``POST /v1/messages`` with what tests/reliability's ``FakeOpenAI`` answers the same
request (its ``_completion``: the gold at each CLEAR stage), in Anthropic's message shape; a batch's request is answered
exactly as that endpoint answers its ``params``::

    with FakeBatchAnthropic(gold=..., api_key="ak-test", max_requests=5) as lm:
        lm.api_base                        # "http://127.0.0.1:PORT/v1": a backbone's and its batch client's api_base
        lm.script("expire_half")           # the next batch: the first half succeeded, the rest "expired"
        lm.fail_lines(match="(case 7)", error_type="api_error")   # those requests "errored"
        lm.created_batches, lm.submitted, lm.batch_requests, lm.chat_requests, lm.headers_seen

What it holds to (https://docs.anthropic.com/en/api/creating-message-batches, .../retrieving-message-batches,
.../retrieving-message-batch-results, .../errors): the key in ``x-api-key`` (else a 401 ``authentication_error``) and
an ``anthropic-version`` header (else a 400); a batch of at most ``max_requests`` requests and ``max_bytes`` bytes (else
a 413 ``request_too_large``), each ``custom_id`` unique and of 1 to 64 letters, digits, "_" or "-" (else a 400);
``processing_status`` in_progress, then ended at the next GET of the batch (canceling, after a cancel, until then); ``request_counts`` of processing, succeeded, errored, canceled, expired; a ``results_url`` once ended,
whose JSONL lines come shuffled (seeded). Errors are Anthropic's ``{"type": "error", "error": {"type", "message"}}``.
"""

from __future__ import annotations

import json
import random
import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.batch.fake_batch import CreatedBatch
from tests.reliability.fakes import FakeOpenAI, _json, stage_of

__all__ = ["FakeBatchAnthropic"]

Reply = tuple[int, dict[str, str], bytes]
_CUSTOM_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_STATUS_OF = {"invalid_request_error": 400, "authentication_error": 401, "api_error": 500, "overloaded_error": 529}


def _anthropic_error(status: int, kind: str, message: str) -> Reply:
    return _json(status, {"type": "error", "error": {"type": kind, "message": message}})


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def as_openai_chat(params: Mapping[str, Any]) -> dict[str, Any]:
    """An Anthropic request as the OpenAI-shaped chat request the gold is read from: its system prompt a message."""
    system = params.get("system")
    if isinstance(system, list):
        system = "".join(str(part.get("text", "")) for part in system if isinstance(part, dict))
    messages = list(params.get("messages") or [])
    return {
        "model": params.get("model"),
        "messages": ([{"role": "system", "content": system}] if system else []) + messages,
    }


@dataclass
class _Batch:
    id: str
    requests: list[dict[str, Any]]
    script: str | None
    status: str = "in_progress"
    created_at: str = field(default_factory=_now)
    ended_at: str | None = None
    cancel_initiated_at: str | None = None
    results: bytes = b""
    counts: dict[str, int] = field(default_factory=dict)


class FakeBatchAnthropic(FakeOpenAI):
    """Anthropic's ``/v1/messages`` and Message Batches (see the module doc)."""

    def __init__(
        self,
        gold: Mapping[str, str] | Callable[[str], str] | None = None,
        *,
        api_key: str | None = None,
        max_requests: int = 100_000,
        max_bytes: int = 256 * 1024 * 1024,
        seed: int = 0,
    ) -> None:
        super().__init__(gold, api_key=api_key)
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.created_batches: list[CreatedBatch] = []
        self.submitted: Counter[str] = Counter()
        self.batch_requests = 0
        self.headers_seen: list[dict[str, str]] = []  # each request's headers
        self.batches: dict[str, _Batch] = {}
        self._scripts: list[str] = []
        self._line_faults: list[tuple[str, str]] = []
        self._rng = random.Random(seed)
        self._ids = 0
        self._state = threading.RLock()
        owner = self
        base: Any = self._handler_class

        class AnthropicHandler(base):  # type: ignore[misc, valid-type]
            def do_GET(self) -> None:
                owner._serve(self, "GET", b"")

            def do_POST(self) -> None:
                owner._serve(self, "POST", self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        self._server.RequestHandlerClass = AnthropicHandler

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> FakeBatchAnthropic:
        return self

    def script(self, name: str) -> None:
        """The next batch: "expire_half" (the first half of its requests succeeded, the rest expired)."""
        if name != "expire_half":
            raise ValueError(f"unknown script {name!r}")
        with self._state:
            self._scripts.append(name)

    def fail_lines(self, *, match: str, error_type: str = "api_error") -> None:
        """Requests whose user message holds ``match`` end "errored" with this error type (every one)."""
        with self._state:
            self._line_faults.append((match, error_type))

    # ----------------------------------------------------------------------------------------- serving

    def _serve(self, handler: Any, method: str, raw: bytes) -> None:
        path = handler.path.split("?", 1)[0].rstrip("/")
        is_batch = path.startswith("/v1/messages/batches")
        with self._state:
            self.headers_seen.append(dict(handler.headers))
            if is_batch:
                self.batch_requests += 1
            else:
                self.chat_requests += 1
        if self.api_key is not None and handler.headers.get("x-api-key") != self.api_key:
            return handler._send(*_anthropic_error(401, "authentication_error", "invalid x-api-key"))
        if not handler.headers.get("anthropic-version"):
            return handler._send(
                *_anthropic_error(400, "invalid_request_error", "anthropic-version header is required")
            )
        with self._state:
            reply = self._route(method, path, raw)
        return handler._send(*reply)

    def _route(self, method: str, path: str, raw: bytes) -> Reply:
        if method == "POST" and path == "/v1/messages":
            return self._on_message(raw)
        if method == "POST" and path == "/v1/messages/batches":
            return self._on_create(raw)
        found = re.match(r"^/v1/messages/batches/(?P<id>[^/]+)(?P<rest>/results|/cancel)?$", path)
        batch = self.batches.get(found.group("id")) if found else None
        if found is None or batch is None:
            return _anthropic_error(404, "not_found_error", f"no such batch or route: {path}")
        rest = found.group("rest")
        if method == "GET" and rest is None:
            self._advance(batch)
            return _json(200, self._batch_json(batch))
        if method == "GET" and rest == "/results":
            if batch.status != "ended":
                return _anthropic_error(400, "invalid_request_error", "the batch is still processing")
            return 200, {"Content-Type": "application/binary"}, batch.results
        if method == "POST" and rest == "/cancel":
            if batch.status == "in_progress":
                batch.status, batch.cancel_initiated_at = "canceling", _now()
                batch.script = "cancel_now"
            return _json(200, self._batch_json(batch))
        return _anthropic_error(405, "invalid_request_error", f"{method} {path} is not served")

    def _on_message(self, raw: bytes) -> Reply:
        try:
            params = json.loads(raw)
        except ValueError:
            return _anthropic_error(400, "invalid_request_error", "the body is not JSON")
        status, body = self._answer_params(params)
        return _json(status, body)

    def _answer_params(self, params: Any) -> tuple[int, dict[str, Any]]:
        """What ``/v1/messages`` answers these params: the gold in Anthropic's message shape, or its error."""
        if not isinstance(params, dict) or not params.get("model") or not isinstance(params.get("messages"), list):
            return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": "model and messages"}}
        if not isinstance(params.get("max_tokens"), int):
            return 400, {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"},
            }
        chat = as_openai_chat(params)
        user = "\n".join(str(m.get("content") or "") for m in chat["messages"] if m.get("role") == "user")
        fault = next((kind for match, kind in self._line_faults if match in user), None)
        if fault is not None:
            return _STATUS_OF.get(fault, 500), {"type": "error", "error": {"type": fault, "message": f"{fault} (fake)"}}
        completion = self._completion(chat, stage_of(chat))
        return 200, {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": params["model"],
            "content": [{"type": "text", "text": completion["choices"][0]["message"]["content"]}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20},
        }

    def _on_create(self, raw: bytes) -> Reply:
        if len(raw) > self.max_bytes:
            return _anthropic_error(
                413, "request_too_large", f"Request exceeds the maximum size of {self.max_bytes} bytes"
            )
        try:
            body = json.loads(raw)
        except ValueError:
            return _anthropic_error(400, "invalid_request_error", "the body is not JSON")
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            return _anthropic_error(400, "invalid_request_error", "requests: a non-empty list is required")
        if len(requests) > self.max_requests:
            message = f"requests: at most {self.max_requests} requests a batch, got {len(requests)}"
            return _anthropic_error(400, "invalid_request_error", message)
        seen: set[str] = set()
        for index, item in enumerate(requests):
            custom_id = item.get("custom_id") if isinstance(item, dict) else None
            if not isinstance(custom_id, str) or not _CUSTOM_ID.match(custom_id):
                return _anthropic_error(400, "invalid_request_error", f"requests.{index}.custom_id: invalid")
            if custom_id in seen:
                message = f"requests.{index}: custom_id '{custom_id}' is already used in this batch"
                return _anthropic_error(400, "invalid_request_error", message)
            seen.add(custom_id)
        self._ids += 1
        batch = _Batch(
            id=f"msgbatch_{self._ids:06d}",
            requests=requests,
            script=self._scripts.pop(0) if self._scripts else None,
        )
        self.batches[batch.id] = batch
        custom_ids = [item["custom_id"] for item in requests]
        self.created_batches.append(CreatedBatch(batch.id, custom_ids, "/v1/messages", {}))
        self.submitted.update(custom_ids)
        return _json(200, self._batch_json(batch))

    def _advance(self, batch: _Batch) -> None:
        if batch.status == "ended":
            return
        batch.status, batch.ended_at = "ended", _now()
        lines: list[dict[str, Any]] = []
        answered = batch.requests
        if batch.script == "expire_half":
            answered = batch.requests[: len(batch.requests) // 2]
        elif batch.script == "cancel_now":
            answered = []
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        for item in answered:
            status, body = self._answer_params(item.get("params"))
            if status == 200:
                result: dict[str, Any] = {"type": "succeeded", "message": body}
                counts["succeeded"] += 1
            else:
                result = {"type": "errored", "error": body}
                counts["errored"] += 1
            lines.append({"custom_id": item["custom_id"], "result": result})
        not_run = "canceled" if batch.script == "cancel_now" else "expired"
        for item in batch.requests[len(answered) :]:
            lines.append({"custom_id": item["custom_id"], "result": {"type": not_run}})
            counts[not_run] += 1
        self._rng.shuffle(lines)
        batch.results = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
        batch.counts = counts

    def _batch_json(self, batch: _Batch) -> dict[str, Any]:
        ended = batch.status == "ended"
        counts = batch.counts or {
            "processing": len(batch.requests),
            "succeeded": 0,
            "errored": 0,
            "canceled": 0,
            "expired": 0,
        }
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": batch.status,
            "request_counts": counts,
            "ended_at": batch.ended_at,
            "created_at": batch.created_at,
            "expires_at": batch.created_at,
            "archived_at": None,
            "cancel_initiated_at": batch.cancel_initiated_at,
            "results_url": f"{self.api_base}/messages/batches/{batch.id}/results" if ended else None,
        }
