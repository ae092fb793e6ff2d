"""A fake of OpenAI's Files and Batch APIs over the synchronous fake, on 127.0.0.1 only.

``FakeBatchOpenAI`` is tests/reliability's ``FakeOpenAI`` (its ``/v1/chat/completions`` unchanged) plus the endpoints a
batch run uses, each answering a batch line exactly as the synchronous endpoint answers the same body (the same
``_completion(body, stage_of(body))``), so a batch run and a synchronous run can be compared decision for decision::

    with FakeBatchOpenAI(gold=..., api_key="sk-test", max_requests=5, max_bytes=10_000) as lm:
        lm.api_base                        # "http://127.0.0.1:PORT/v1"
        lm.script("expire_half")           # the next batch created: "expire_half", "only_failures",
                                           # "fail_validation" or "cancelled"
        lm.fail_lines(match="(case 7)", status=500, times=1)   # lines whose user message holds the text
        lm.fail_next("create", "429")      # the next request to that call gets a fault (see `fail_next`)
        lm.created_batches                 # each batch made: its id, custom_ids in submission order, endpoint
        lm.submitted["q1-parametric"]      # times a custom_id was submitted
        lm.batch_requests                  # HTTP requests to the files and batches endpoints
        lm.chat_requests                   # synchronous chat requests (inherited)

What it holds to, from OpenAI's documentation (https://platform.openai.com/docs/api-reference/batch,
https://platform.openai.com/docs/guides/batch), with OpenAI's error body ``{"error": {"message", "type", "param",
"code"}}``:

- upload (``POST /v1/files``, multipart): a known ``purpose``; a "batch" file of at most ``max_bytes`` (200 MB) —
  else a 400 at upload;
- create (``POST /v1/batches``): an uploaded file of purpose "batch", an ``endpoint`` of /v1/responses,
  /v1/chat/completions, /v1/embeddings or /v1/completions, ``completion_window`` "24h", ``metadata`` of at most 16
  pairs (keys up to 64 characters, values up to 512) — else a 400 at create;
- the file's lines, checked while the batch is "validating": each a JSON object with a ``custom_id`` unique in the
  file, ``method`` "POST", ``url`` the batch's endpoint, one ``body.model`` for the whole file, at most
  ``max_requests`` lines — else the batch ends "failed" with ``errors.data[{code, message, param, line}]``;
- statuses validating -> in_progress -> finalizing -> completed, ``advance_per_poll`` steps per ``GET`` of the batch;
  ``request_counts``; an output file of the lines answered 200 and an error file of the rest (a line answered with an
  HTTP error carries its response there; a line never run carries ``error: {code, message}`` and no response); both
  shuffled (seeded); a completed batch with no line answered 200 has no output file;
- cancel (``POST /v1/batches/{id}/cancel``): cancelling, then cancelled, its unrun lines "batch_cancelled"; a batch
  that has ended answers 400;
- ``GET /v1/batches`` lists the batches, newest first; ``GET /v1/files/{id}/content`` a file's bytes;
- with ``api_key``, every one of these endpoints answers another bearer token with OpenAI's 401.

Scripts (each for the next batch created): "expire_half" (in_progress, then expired: the first half of the lines, in
submission order, answered, the rest in the error file as "batch_expired"), "only_failures" (completed with every line
answered 500: no output file), "fail_validation" (failed in validation), "cancelled" (cancelling, then cancelled: the
first half answered, the rest "batch_cancelled").
"""

from __future__ import annotations

import email.policy
import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.parser import BytesParser
from typing import Any

from tests.reliability.fakes import FAULTS, FakeOpenAI, _content, _json, _openai_error, stage_of

__all__ = ["BATCH_CALLS", "SCRIPTS", "CreatedBatch", "FakeBatchOpenAI"]

SCRIPTS = ("expire_half", "only_failures", "fail_validation", "cancelled")
# The calls `fail_next` can fault.
BATCH_CALLS = ("upload", "create", "list", "status", "cancel", "content")
_OWN_FAULTS = ("reset", "lost_reply", "echo_key_401")
ENDPOINTS = ("/v1/responses", "/v1/chat/completions", "/v1/embeddings", "/v1/completions")
PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals")
MAX_METADATA_PAIRS, MAX_METADATA_KEY, MAX_METADATA_VALUE = 16, 64, 512
_EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."
_CANCELLED_MESSAGE = "This request was not executed because the batch was cancelled."

Reply = tuple[int, dict[str, str], bytes]
_ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("POST", re.compile(r"^/v1/files$"), "upload"),
    ("GET", re.compile(r"^/v1/files/(?P<id>[^/]+)/content$"), "content"),
    ("POST", re.compile(r"^/v1/batches$"), "create"),
    ("GET", re.compile(r"^/v1/batches$"), "list"),
    ("GET", re.compile(r"^/v1/batches/(?P<id>[^/]+)$"), "status"),
    ("POST", re.compile(r"^/v1/batches/(?P<id>[^/]+)/cancel$"), "cancel"),
)


@dataclass
class CreatedBatch:
    """A batch as it was created: its id, its lines' custom_ids in submission order, its endpoint and metadata."""

    id: str
    custom_ids: list[str]
    endpoint: str
    metadata: dict[str, str]


@dataclass
class _LineFault:
    match: str
    status: int
    times: int | None


@dataclass
class _Batch:
    id: str
    endpoint: str
    input_file_id: str
    metadata: dict[str, str]
    lines: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    path: list[str]  # the statuses still to come
    script: str | None
    status: str = "validating"
    created_at: int = field(default_factory=lambda: int(time.time()))
    at: dict[str, int] = field(default_factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})


def _multipart(content_type: str, raw: bytes) -> dict[str, bytes]:
    """A multipart form's fields by name (a file's bytes as they came)."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    if not message.is_multipart():
        return {}
    fields: dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if isinstance(name, str):
            fields[name] = part.get_payload(decode=True) or b""
    return fields


def _error_body(status: int) -> dict[str, Any]:
    """OpenAI's error body for a line answered with this status (the synchronous fake's own, where it has one)."""
    fixed = FAULTS.get(str(status))
    if fixed is not None:
        return dict(json.loads(fixed[2]))
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return {"error": {"message": f"HTTP {status}", "type": kind, "param": None, "code": None}}


class FakeBatchOpenAI(FakeOpenAI):
    """``FakeOpenAI`` with OpenAI's Files and Batch APIs (see the module doc)."""

    def __init__(
        self,
        gold: Mapping[str, str] | Callable[[str], str] | None = None,
        *,
        api_key: str | None = None,
        max_requests: int = 50_000,
        max_bytes: int = 200 * 1024 * 1024,
        advance_per_poll: int = 1,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(gold, api_key=api_key, **kwargs)
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.advance_per_poll = advance_per_poll
        self.created_batches: list[CreatedBatch] = []
        self.submitted: Counter[str] = Counter()
        self.batch_requests = 0
        self.files: dict[str, tuple[str, bytes]] = {}  # id -> (purpose, content)
        self.batches: dict[str, _Batch] = {}
        self._scripts: list[str] = []
        self._line_faults: list[_LineFault] = []
        self._call_faults: list[tuple[str, str]] = []
        self._rng = random.Random(seed)
        self._ids = 0
        self._state = threading.RLock()
        owner = self
        base: Any = self._handler_class

        class BatchHandler(base):  # type: ignore[misc, valid-type]
            def do_GET(self) -> None:
                if not owner._serve(self, "GET", b""):
                    super().do_GET()

            def do_POST(self) -> None:
                if owner._route("POST", self.path) is None:
                    return super().do_POST()
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner._serve(self, "POST", raw)
                return None

        # The server reads its handler class per request; none has come yet.
        self._server.RequestHandlerClass = BatchHandler

    # ----------------------------------------------------------------------------------------- the API

    def __enter__(self) -> FakeBatchOpenAI:
        return self

    def script(self, name: str) -> None:
        """The next batch created follows this script (one of `SCRIPTS`); several queue in order."""
        if name not in SCRIPTS:
            raise ValueError(f"unknown script {name!r}; one of {', '.join(SCRIPTS)}")
        with self._state:
            self._scripts.append(name)

    def fail_lines(self, *, match: str, status: int = 500, times: int | None = 1) -> None:
        """Lines whose user message holds ``match`` are answered with ``status`` and OpenAI's error body (in the error
        file), the next ``times`` of them (None: every one)."""
        with self._state:
            self._line_faults.append(_LineFault(match, status, times))

    def fail_next(self, call: str, kind: str, *, times: int = 1) -> None:
        """The next ``times`` requests to ``call`` (one of `BATCH_CALLS`) get fault ``kind``: a kind of the synchronous
        fake's ``FAULTS`` with a fixed reply ("429", "500", "503", "401", "insufficient_quota", ...), "reset" (the
        connection closed unanswered, nothing done), "lost_reply" (the call done, then the connection closed
        unanswered: a batch made whose creator never hears of it) or "echo_key_401" (a 401 quoting the whole bearer
        token it was sent, as a proxy might)."""
        if call not in BATCH_CALLS:
            raise ValueError(f"unknown call {call!r}; one of {', '.join(BATCH_CALLS)}")
        if kind not in _OWN_FAULTS and FAULTS.get(kind) is None:
            raise ValueError(f"fault {kind!r} has no fixed reply")
        with self._state:
            self._call_faults.extend([(call, kind)] * times)

    # ----------------------------------------------------------------------------------------- serving

    def _route(self, method: str, path: str) -> tuple[str, str | None] | None:
        bare = path.split("?", 1)[0].rstrip("/")
        for verb, pattern, call in _ROUTES:
            found = pattern.match(bare) if verb == method else None
            if found is not None:
                return call, found.groupdict().get("id")
        return None

    def _serve(self, handler: Any, method: str, raw: bytes) -> bool:
        """Answer a files or batches request; False for any other path (the synchronous fake's)."""
        route = self._route(method, handler.path)
        if route is None:
            return False
        call, ident = route
        with self._state:
            self.batch_requests += 1
        auth = handler.headers.get("Authorization") or ""
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            handler._send(*FAULTS["401"])
            return True
        with self._state:
            fault = next((kind for name, kind in self._call_faults if name == call), None)
            if fault is not None:
                self._call_faults.remove((call, fault))
        if fault == "reset":
            handler.close_connection = True
            return True
        if fault == "echo_key_401":
            token = auth.removeprefix("Bearer ").strip()
            message = f"Incorrect API key provided: {token}."
            handler._send(*_openai_error(401, message, "invalid_request_error", "invalid_api_key"))
            return True
        query = dict(part.partition("=")[::2] for part in handler.path.partition("?")[2].split("&") if part)
        with self._state:
            reply = getattr(self, f"_on_{call}")(handler, ident, raw, query) if fault in (None, "lost_reply") else None
        if fault == "lost_reply":
            handler.close_connection = True
            return True
        fixed = FAULTS.get(fault) if fault is not None else None
        handler._send(*(fixed if fixed is not None else reply))
        return True

    def _new_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}{self._ids:06d}"

    def _on_upload(self, handler: Any, ident: str | None, raw: bytes, query: dict[str, str]) -> Reply:
        fields = _multipart(handler.headers.get("Content-Type") or "", raw)
        purpose = fields.get("purpose", b"").decode()
        if "file" not in fields:
            return _openai_error(400, "Missing required parameter: 'file'.", "invalid_request_error", None)
        if purpose not in PURPOSES:
            message = f"'{purpose}' is not one of {list(PURPOSES)} - 'purpose'"
            return _with_param(_openai_error(400, message, "invalid_request_error", "invalid_value"), "purpose")
        content = fields["file"]
        if purpose == "batch" and len(content) > self.max_bytes:
            message = f"File is too large: {len(content)} bytes; a batch file may hold at most {self.max_bytes} bytes."
            return _with_param(_openai_error(400, message, "invalid_request_error", "file_too_large"), "file")
        file_id = self._new_id("file-")
        self.files[file_id] = (purpose, content)
        return _json(200, _file_json(file_id, purpose, content))

    def _on_content(self, handler: Any, ident: str | None, raw: bytes, query: dict[str, str]) -> Reply:
        if ident not in self.files:
            return _openai_error(404, f"No such File object: {ident}", "invalid_request_error", None)
        return 200, {"Content-Type": "application/octet-stream"}, self.files[ident][1]

    def _on_create(self, handler: Any, ident: str | None, raw: bytes, query: dict[str, str]) -> Reply:
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return _openai_error(400, "We could not parse the JSON body of your request.", "invalid_request_error")
        refused = _refuse_create(body, self.files)
        if refused is not None:
            return refused
        content = self.files[body["input_file_id"]][1]
        lines, errors = self._validated(content, body["endpoint"])
        script = self._scripts.pop(0) if self._scripts else None
        if script == "fail_validation" and not errors:
            errors = [{"code": "invalid_request", "message": "The batch was refused (scripted).", "line": None}]
        path = {"expire_half": ["in_progress", "expired"], "cancelled": ["in_progress", "cancelling", "cancelled"]}
        batch = _Batch(
            id=self._new_id("batch_"),
            endpoint=body["endpoint"],
            input_file_id=body["input_file_id"],
            metadata=dict(body.get("metadata") or {}),
            lines=lines,
            errors=[{"param": None, **error} for error in errors],
            path=["failed"] if errors else path.get(script or "", ["in_progress", "finalizing", "completed"]),
            script=script,
        )
        batch.at["created"] = batch.created_at
        self.batches[batch.id] = batch
        custom_ids = [str(line.get("custom_id")) for line in _parsed(content) if isinstance(line, dict)]
        self.created_batches.append(CreatedBatch(batch.id, custom_ids, batch.endpoint, batch.metadata))
        self.submitted.update(custom_ids)
        return _json(200, self._batch_json(batch))

    def _on_list(self, handler: Any, ident: str | None, raw: bytes, query: dict[str, str]) -> Reply:
        limit = int(query.get("limit") or 20)
        newest = list(reversed(self.batches.values()))[:limit]
        data = [self._batch_json(batch) for batch in newest]
        return _json(200, {"object": "list", "data": data, "has_more": len(self.batches) > limit})

    def _on_status(self, handler: Any, ident: str | None, raw: bytes, query: dict[str, str]) -> Reply:
        batch = self.batches.get(ident or "")
        if batch is None:
            return _openai_error(404, f"No batch found with id '{ident}'.", "invalid_request_error", None)
        for _ in range(self.advance_per_poll):
            if batch.path:
                self._enter(batch, batch.path.pop(0))
        return _json(200, self._batch_json(batch))

    def _on_cancel(self, handler: Any, ident: str | None, raw: bytes, query: dict[str, str]) -> Reply:
        batch = self.batches.get(ident or "")
        if batch is None:
            return _openai_error(404, f"No batch found with id '{ident}'.", "invalid_request_error", None)
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            message = f"Cannot cancel a batch with status '{batch.status}'."
            return _openai_error(400, message, "invalid_request_error", None)
        if batch.status != "cancelling":
            batch.script = "cancel_now"
            batch.path = ["cancelled"]
            self._enter(batch, "cancelling")
        return _json(200, self._batch_json(batch))

    # ----------------------------------------------------------------------------------------- a batch's life

    def _validated(self, content: bytes, endpoint: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The file's lines, and what OpenAI's validation would find wrong with them (each with its line number)."""
        lines: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        seen: set[str] = set()
        models: set[str] = set()
        for number, line in enumerate(_parsed(content), start=1):
            if not isinstance(line, dict):
                errors.append(_line_error("invalid_json_line", "This line is not parseable as valid JSON.", number))
                continue
            custom_id, body = line.get("custom_id"), line.get("body")
            if not isinstance(custom_id, str) or not custom_id:
                errors.append(_line_error("missing_required_parameter", "Missing custom_id.", number))
            elif custom_id in seen:
                errors.append(_line_error("duplicate_custom_id", f"The custom_id '{custom_id}' is not unique.", number))
            seen.add(str(custom_id))
            if line.get("method") != "POST":
                errors.append(_line_error("invalid_method", "The method must be POST.", number))
            if line.get("url") != endpoint:
                message = f"The url '{line.get('url')}' does not match the batch's endpoint '{endpoint}'."
                errors.append(_line_error("mismatched_endpoint", message, number))
            model = body.get("model") if isinstance(body, dict) else None
            models.add(str(model))
            if len(models) > 1:
                message = f"The model '{model}' differs from the file's other lines: one model per batch file."
                errors.append(_line_error("mismatched_model", message, number))
                models = {next(iter(models - {str(model)}))}
            lines.append(line)
        if not lines and not errors:
            errors.append(_line_error("empty_file", "The batch input file is empty.", None))
        if len(lines) > self.max_requests:
            message = f"The file holds {len(lines)} requests; a batch may hold at most {self.max_requests}."
            errors.append(_line_error("too_many_requests", message, None))
        return lines, errors

    def _enter(self, batch: _Batch, status: str) -> None:
        batch.status = status
        batch.at[status] = int(time.time())
        if status == "in_progress":
            batch.counts["total"] = len(batch.lines)
        if status in ("completed", "expired", "cancelled"):
            answered = batch.lines
            if batch.script in ("expire_half", "cancelled"):
                answered = batch.lines[: len(batch.lines) // 2]
            elif batch.script == "cancel_now":
                answered = []
            self._finish(batch, answered, "batch_expired" if status == "expired" else "batch_cancelled")

    def _finish(self, batch: _Batch, answered: list[dict[str, Any]], not_run: str) -> None:
        """The output and error files of a batch that has ended: its answered lines, then those never run."""
        output: list[dict[str, Any]] = []
        failed: list[dict[str, Any]] = []
        for line in answered:
            status, body = self._line_answer(line["body"], forced=500 if batch.script == "only_failures" else None)
            record = {
                "id": self._new_id("batch_req_"),
                "custom_id": line["custom_id"],
                "response": {"status_code": status, "request_id": self._new_id("req_"), "body": body},
                "error": None,
            }
            (output if status == 200 else failed).append(record)
        message = _EXPIRED_MESSAGE if not_run == "batch_expired" else _CANCELLED_MESSAGE
        for line in batch.lines[len(answered) :]:
            error = {"code": not_run, "message": message}
            failed.append(
                {"id": self._new_id("batch_req_"), "custom_id": line["custom_id"], "response": None, "error": error}
            )
        self._rng.shuffle(output)
        self._rng.shuffle(failed)
        batch.counts.update(total=len(batch.lines), completed=len(output), failed=len(failed))
        if output:
            batch.output_file_id = self._file_of(output)
        if failed:
            batch.error_file_id = self._file_of(failed)

    def _file_of(self, records: list[dict[str, Any]]) -> str:
        file_id = self._new_id("file-")
        self.files[file_id] = ("batch_output", b"".join(json.dumps(r).encode() + b"\n" for r in records))
        return file_id

    def _line_answer(self, body: Any, *, forced: int | None = None) -> tuple[int, dict[str, Any]]:
        """What the synchronous endpoint answers this body (a line fault or ``forced`` status aside)."""
        if not isinstance(body, dict) or not body.get("model") or not isinstance(body.get("messages"), list):
            missing = {"message": "you must provide a model and messages", "type": "invalid_request_error"}
            return 400, {"error": {**missing, "param": None, "code": None}}
        user = "\n".join(_content(m) for m in body["messages"] if m.get("role") == "user")
        status = forced or self._take_line_fault(user)
        if status is not None:
            return status, _error_body(status)
        return 200, self._completion(body, stage_of(body))

    def _take_line_fault(self, user: str) -> int | None:
        for fault in self._line_faults:
            if fault.match in user:
                if fault.times is not None:
                    fault.times -= 1
                    if fault.times <= 0:
                        self._line_faults.remove(fault)
                return fault.status
        return None

    def _batch_json(self, batch: _Batch) -> dict[str, Any]:
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.endpoint,
            "errors": {"object": "list", "data": batch.errors} if batch.status == "failed" else None,
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": batch.status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": batch.created_at,
            "in_progress_at": batch.at.get("in_progress"),
            "expires_at": batch.created_at + 24 * 3600,
            "finalizing_at": batch.at.get("finalizing"),
            "completed_at": batch.at.get("completed"),
            "failed_at": batch.at.get("failed"),
            "expired_at": batch.at.get("expired"),
            "cancelling_at": batch.at.get("cancelling"),
            "cancelled_at": batch.at.get("cancelled"),
            "request_counts": dict(batch.counts),
            "metadata": batch.metadata,
        }


def _parsed(content: bytes) -> list[Any]:
    """Each non-empty line of a JSONL file as JSON (None for a line that is not)."""
    out: list[Any] = []
    for raw in content.splitlines():
        if raw.strip():
            try:
                out.append(json.loads(raw))
            except ValueError:
                out.append(None)
    return out


def _line_error(code: str, message: str, line: int | None) -> dict[str, Any]:
    return {"code": code, "message": message, "line": line}


def _with_param(reply: Reply, param: str) -> Reply:
    status, headers, raw = reply
    payload = json.loads(raw)
    payload["error"]["param"] = param
    return status, headers, json.dumps(payload).encode()


def _file_json(file_id: str, purpose: str, content: bytes) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": len(content),
        "created_at": int(time.time()),
        "filename": "batch.jsonl",
        "purpose": purpose,
    }


def _refuse_create(body: Mapping[str, Any], files: Mapping[str, tuple[str, bytes]]) -> Reply | None:
    """The 400 (or 404) OpenAI answers a batch's creation with, or None when the request is valid."""
    file_id = body.get("input_file_id")
    if not isinstance(file_id, str) or file_id not in files:
        return _openai_error(404, f"No such File object: {file_id}", "invalid_request_error", None)
    if files[file_id][0] != "batch":
        message = "The input file must be uploaded with purpose 'batch'."
        return _with_param(_openai_error(400, message, "invalid_request_error", "invalid_value"), "input_file_id")
    if body.get("endpoint") not in ENDPOINTS:
        message = f"'{body.get('endpoint')}' is not one of {list(ENDPOINTS)} - 'endpoint'"
        return _with_param(_openai_error(400, message, "invalid_request_error", "invalid_value"), "endpoint")
    if body.get("completion_window") != "24h":
        message = f"'{body.get('completion_window')}' is not one of ['24h'] - 'completion_window'"
        return _with_param(_openai_error(400, message, "invalid_request_error", "invalid_value"), "completion_window")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict) or len(metadata) > MAX_METADATA_PAIRS:
        count = len(metadata) if isinstance(metadata, dict) else 0
        message = (
            f"Invalid 'metadata': too many properties. Expected an object with at most {MAX_METADATA_PAIRS} "
            f"properties, but got an object with {count} properties instead."
        )
        return _with_param(
            _openai_error(400, message, "invalid_request_error", "object_above_max_properties"), "metadata"
        )
    for key, value in metadata.items():
        if len(key) > MAX_METADATA_KEY or not isinstance(value, str) or len(value) > MAX_METADATA_VALUE:
            message = (
                f"Invalid 'metadata.{key[:20]}': keys hold at most {MAX_METADATA_KEY} characters and values are "
                f"strings of at most {MAX_METADATA_VALUE}."
            )
            return _with_param(
                _openai_error(400, message, "invalid_request_error", "string_above_max_length"), "metadata"
            )
    return None
