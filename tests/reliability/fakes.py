"""Fault-injecting fakes of the paid services, on 127.0.0.1 only: an OpenAI-compatible chat server that answers every
CLEAR stage with the gold, and Tavily (the documented fake of tests/retrieval/test_tavily.py, plus faults).

The fake answers with the gold, so under any fault each answer must be correct, marked degraded, or the run stopped
with one line: anything else is a silent flip.

OpenAI-compatible (``FakeOpenAI``)::

    with FakeOpenAI(gold={"Which ...?": "B"}) as lm:   # question text -> gold letter(s); default "A" for any
        lm.api_base                                    # "http://127.0.0.1:PORT/v1", for [backbones.main] api_base
        lm.inject("503", times=2)                      # the next 2 chat requests get OpenAI's 503 body
        lm.inject("context_vllm", stage="dynamic_answer")   # only requests of that stage (clearmed.testing names)
        lm.inject("401", times=None)                   # every request until lm.clear()
        lm.inject("trickle", times=None, every=50)     # one request in 50, until lm.clear()
        lm.inject("null_content", times=2, match="(case 7)")  # requests whose user message holds this text
        lm.served["503"]                               # how many requests each fault (and "ok") answered
        lm.chat_requests                               # chat requests seen; lm.requests: the last 200 of them
        lm.delays["dynamic_answer"] = 1.0              # that stage's replies wait a second (bounded, as hangs)
        lm.in_flight                                   # requests received and not yet answered

    ``FAULTS`` lists every kind with what it sends. Replies follow OpenAI's error shape ``{"error": {"message",
    "type", "param", "code"}}`` unless the kind names another server's (vLLM < 0.7 and SGLang: the error object at
    the top level; llama.cpp: ``exceed_context_size_error``; Anthropic: ``{"type": "error", "error": {...}}``).
    ``api_key`` makes the server refuse any other bearer token with OpenAI's 401. ``stage_of(request)`` tells
    which stage sent a request. Hangs are bounded (``hang_s``) and end at ``close()``.

Tavily (``FakeTavilyServer``)::

    with FakeTavilyServer() as web:
        web.url, web.key                               # TavilyOptions(api_base_url=web.url); the key to set
        web.inject("malformed", times=1)               # a 200 whose body is HTML, not JSON
        web.inject("429")                              # Tavily's 429 body with Retry-After: 0
        web.inject("trickle")                          # a 200 sent a byte every `trickle_s` seconds (up to `hang_s`)
        web.state                                      # tests/retrieval's FakeTavily: requests, credits, valid_key

    Tavily's documented limits hold throughout: 400 for a query over 400 characters, 401 for another key, 432/433
    once ``state.credits`` is spent, credits by search depth.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from clearmed.testing import QuietHTTPServer, format_chat_reply, identify_stage

# The documented Tavily fake lives with the Tavily client's tests; reused here, not copied.
from ..retrieval.test_tavily import KEY as TAVILY_KEY  # noqa: TID252
from ..retrieval.test_tavily import FakeTavily, _handler  # noqa: TID252

__all__ = ["FAULTS", "TAVILY_FAULTS", "FakeOpenAI", "FakeTavilyServer", "fake_questions_gold", "gold_reply", "stage_of"]

Reply = tuple[int, dict[str, str], bytes]


def _json(status: int, payload: object, headers: Mapping[str, str] | None = None) -> Reply:
    return status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(payload).encode()


def _openai_error(status: int, message: str, kind: str, code: str | None = None, **headers: str) -> Reply:
    return _json(status, {"error": {"message": message, "type": kind, "param": None, "code": code}}, headers)


_CONTEXT_OPENAI = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens. "
    "Please reduce the length of the messages."
)
# Each fault kind: the reply it sends (None: handled specially, see `FakeOpenAI._fault`).
FAULTS: dict[str, Reply | None] = {
    "429": _openai_error(
        429, "Rate limit reached for requests", "requests", "rate_limit_exceeded", **{"Retry-After": "0"}
    ),
    "500": _openai_error(500, "The server had an error while processing your request.", "server_error"),
    "502": _openai_error(502, "Bad gateway.", "server_error"),
    "503": _openai_error(503, "The engine is currently overloaded, please try again later.", "server_error"),
    "401": _openai_error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
    "insufficient_quota": _openai_error(
        429, "You exceeded your current quota.", "insufficient_quota", "insufficient_quota"
    ),
    "model_not_found": _openai_error(404, "The model `m` does not exist.", "invalid_request_error", "model_not_found"),
    "context_openai": _openai_error(400, _CONTEXT_OPENAI, "invalid_request_error", "context_length_exceeded"),
    # vLLM before 0.7 (and SGLang): the error object at the top level, the status repeated as `code`.
    "context_vllm": _json(
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you requested 5012 tokens "
            "(4500 in the messages, 512 in the completion). Please reduce the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ),
    "context_sglang": _json(
        400,
        {
            "object": "error",
            "message": "The input (5012 tokens) is longer than the model's context length (4096 tokens).",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
    ),
    "context_llamacpp": _json(
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 5012,
                "n_ctx": 4096,
            }
        },
    ),
    "context_anthropic": _json(
        400,
        {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"},
        },
    ),
    "truncated_json": None,  # a 200 whose JSON body stops halfway
    "html": (200, {"Content-Type": "text/html"}, b"<html><body><h1>502 Bad Gateway</h1></body></html>"),
    "empty_200": (200, {"Content-Type": "application/json"}, b""),
    "empty_choices": None,  # a well-formed completion whose `choices` list is empty
    "null_content": None,  # a well-formed completion whose message content is null
    "echo_key_400": None,  # a 400 quoting the bearer token it was sent (a proxy's "invalid header" message)
    "echo_key_500": None,  # the same as a 500 (retried, then recorded)
    "timeout": None,  # holds the request `hang_s` seconds (bounded), then drops the connection unanswered
    "reset": None,  # reads the request and closes the connection without a reply
    "trickle": None,  # a 200 sent one byte every `trickle_s` seconds (an idle-read timeout never fires)
    "lone_surrogate": None,  # the gold reply with an escaped lone surrogate ("\\udcff") in its text: valid JSON, no text
}


@dataclass
class _Injection:
    kind: str
    times: int | None  # None: until cleared
    stage: str | None
    every: int = 1  # answers one matching request in `every`
    match: str | None = None  # only requests whose user message holds this text
    seen: int = 0


def _content(message: Mapping[str, Any]) -> str:
    value = message.get("content") or ""
    return value if isinstance(value, str) else "".join(part.get("text", "") for part in value)


def stage_of(body: Mapping[str, Any]) -> str:
    """The CLEAR stage that sent this chat request (`clearmed.testing.identify_stage`), or a grader's."""
    messages = body.get("messages") or []
    system = "\n".join(_content(m) for m in messages if m.get("role") == "system")
    user = "\n".join(_content(m) for m in messages if m.get("role") == "user")
    stage = identify_stage(system, user)
    if stage == "unknown" and "`verdict`" in system:
        return "grade_free_text"
    if stage == "unknown" and "`criteria_met`" in system:
        return "grade_rubric"
    return stage


_QUESTION_FIELD = re.compile(r"\[\[ ## (?:question|case) ## \]\]\n(.*?)(?:\n\n\[\[ ## |\Z)", re.DOTALL)
_IDS = re.compile(r"^\[((?:W|F)[\d.]+)\]", re.MULTILINE)


def gold_reply(stage: str, gold: str, user: str) -> dict[str, object] | None:
    """The reply of a model that knows the gold (letters "A" or "A,C"; free text as is) at this stage."""
    if stage == "parametric":
        return {"rationale": "from memory", "answer": gold}
    if stage in ("local_answer", "dynamic_answer"):
        return {
            "rationale": "the evidence says so",
            "cited_ids": ["L1" if stage == "local_answer" else "W1"],
            "answer": gold,
        }
    if stage == "source_quality":
        return {"quality_labels": {i: "high" for i in sorted(set(_IDS.findall(user)))}}
    if stage == "verifier":
        return {"rationale": "all agree", "answer": gold, "route": "consensus", "confidence": "high"}
    if stage in ("web_query", "followup_query"):
        return {"query": "medical question evidence"}
    if stage == "format_gate":
        return {"letters": gold}
    if stage == "agreement":
        return {"parametric_equals_local": True, "parametric_equals_dynamic": True, "local_equals_dynamic": True}
    if stage == "guard":
        return {
            "rationale": "r",
            "supports_challenger": False,
            "default_not_better_supported": False,
            "aligned_with_question": True,
            "supports_exact_option": True,
            "no_unresolved_conflict": True,
        }
    if stage == "audit":
        return {
            "rationale": "r",
            "clearly_supports_challenger": False,
            "aligned_with_question": True,
            "supports_exact_option": True,
        }
    if stage == "response":
        return {"response": gold}
    if stage == "grade_free_text":
        return {"rationale": "matches the reference", "verdict": "correct"}
    if stage == "grade_rubric":
        return {"explanation": "met", "criteria_met": True}
    if stage == "qpis_plan":
        return {"subqueries": ["medical question evidence"]}
    if stage == "qpis_check":
        return {"sufficient": True, "next_query": ""}
    return None


class FakeOpenAI:
    """An OpenAI-compatible ``POST /v1/chat/completions`` (and ``GET /v1/models``) that answers with the gold."""

    def __init__(
        self,
        gold: Mapping[str, str] | Callable[[str], str] | None = None,
        *,
        api_key: str | None = None,
        hang_s: float = 3.0,
        trickle_s: float = 1.0,
        keep_requests: int = 200,
    ) -> None:
        self.gold = gold
        self.api_key = api_key
        self.hang_s = hang_s
        self.trickle_s = trickle_s
        self.requests: deque[dict[str, Any]] = deque(maxlen=keep_requests)
        self.served: Counter[str] = Counter()
        self.chat_requests = 0
        self.in_flight = 0
        self.delays: dict[str, float] = {}
        self._injections: list[_Injection] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real API servers do
            # Headers and body go out as two writes; with Nagle's algorithm each reply would wait 40 ms for an ACK.
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(*_json(200, {"object": "list", "data": [{"id": "m", "object": "model"}]}))
                else:
                    self._send(*_openai_error(404, "not found", "invalid_request_error"))

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    return self._send(
                        *_openai_error(
                            400, "We could not parse the JSON body of your request.", "invalid_request_error"
                        )
                    )
                auth = self.headers.get("Authorization") or ""
                owner._answer(self, body, auth)

            def _send(self, status: int, headers: Mapping[str, str], payload: bytes) -> None:
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout case)
                    pass

        self._handler_class = Handler
        self._server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    # ----------------------------------------------------------------------------------------- the API

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def inject(
        self, kind: str, *, times: int | None = 1, stage: str | None = None, every: int = 1, match: str | None = None
    ) -> None:
        """Answer the next `times` chat requests (of `stage`, and holding `match` in their user message, when given;
        one in `every` of them) with fault `kind`; None: until `clear()`. The first injection a request meets wins."""
        if kind not in FAULTS:
            raise ValueError(f"unknown fault {kind!r}; one of {', '.join(FAULTS)}")
        with self._lock:
            self._injections.append(_Injection(kind, times, stage, every, match))

    def clear(self) -> None:
        """No more faults: every later request is answered with the gold."""
        with self._lock:
            self._injections.clear()

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeOpenAI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------------------------------- serving

    def _gold_for(self, user: str) -> str:
        if callable(self.gold):
            return self.gold(user)
        if not self.gold:
            return "A"
        match = _QUESTION_FIELD.search(user)
        if match is not None and (found := self.gold.get(match.group(1).strip())) is not None:
            return found
        return next((letters for text, letters in self.gold.items() if text in user), "A")

    def _take(self, stage: str, user: str) -> str | None:
        with self._lock:
            for injection in self._injections:
                if injection.stage is not None and injection.stage != stage:
                    continue
                if injection.match is not None and injection.match not in user:
                    continue
                injection.seen += 1
                if injection.seen % injection.every:
                    continue
                if injection.times is not None:
                    injection.times -= 1
                    if injection.times <= 0:
                        self._injections.remove(injection)
                return injection.kind
        return None

    def _answer(self, handler: Any, body: dict[str, Any], auth: str) -> None:
        stage = stage_of(body)
        with self._lock:
            self.chat_requests += 1
            self.in_flight += 1
            self.requests.append({"stage": stage, "body": body, "auth": auth})
        try:
            if self.delays.get(stage):
                self._closing.wait(min(self.delays[stage], self.hang_s))
            self._reply(handler, body, auth, stage)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _reply(self, handler: Any, body: dict[str, Any], auth: str, stage: str) -> None:
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            self.served["401"] += 1
            return handler._send(*FAULTS["401"])
        if not body.get("model") or not isinstance(body.get("messages"), list):
            return handler._send(*_openai_error(400, "you must provide a model and messages", "invalid_request_error"))
        kind = self._take(stage, "\n".join(_content(m) for m in body["messages"] if m.get("role") == "user"))
        with self._lock:
            self.served[kind or "ok"] += 1
        if kind is not None:
            return self._fault(handler, kind, body, auth)
        return handler._send(*_json(200, self._completion(body, stage)))

    def _completion(self, body: Mapping[str, Any], stage: str) -> dict[str, Any]:
        messages = body.get("messages") or []
        user = "\n".join(_content(m) for m in messages if m.get("role") == "user")
        reply = gold_reply(stage, self._gold_for(user), user)
        text = format_chat_reply(reply) if reply is not None else "I cannot tell which stage this is."
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        }

    def _fault(self, handler: Any, kind: str, body: Mapping[str, Any], auth: str) -> None:
        reply = FAULTS[kind]
        if reply is not None:
            return handler._send(*reply)
        token = auth.removeprefix("Bearer ").strip()
        if kind in ("echo_key_400", "echo_key_500"):
            status = 400 if kind == "echo_key_400" else 500
            return handler._send(
                *_openai_error(status, f"invalid authorization header value {token!r}", "invalid_request_error")
            )
        if kind == "lone_surrogate":
            completion = self._completion(body, stage_of(body))
            message = completion["choices"][0]["message"]
            message["content"] = message["content"].replace("[[ ## completed ## ]]", "\udcff\n\n[[ ## completed ## ]]")
            message["content"] = message["content"].replace("## rationale ## ]]\n", "## rationale ## ]]\n\udcff ")
            return handler._send(*_json(200, completion))
        if kind in ("empty_choices", "null_content"):
            completion = self._completion(body, stage_of(body))
            if kind == "empty_choices":
                completion["choices"] = []
            else:
                completion["choices"][0]["message"]["content"] = None
            return handler._send(*_json(200, completion))
        if kind == "truncated_json":
            whole = json.dumps(self._completion(body, stage_of(body))).encode()
            return handler._send(200, {"Content-Type": "application/json"}, whole[: len(whole) // 2])
        if kind == "timeout":
            self._closing.wait(self.hang_s)
            handler.close_connection = True
            return None
        if kind == "reset":
            handler.close_connection = True
            with contextlib.suppress(OSError):
                handler.connection.shutdown(socket.SHUT_RDWR)
            return None
        if kind == "trickle":
            trickle(handler, self._completion(body, stage_of(body)), self.trickle_s, self._closing)
            handler.close_connection = True
            return None
        raise AssertionError(f"fault {kind} has no reply")


def trickle(
    handler: Any, payload: object, every_s: float, closing: threading.Event, *, for_s: float | None = None
) -> None:
    """A 200 whose JSON body goes out one byte every ``every_s`` seconds (a read timeout never fires), until it is all
    sent, the server closes, ``for_s`` seconds have passed, or the client hangs up (what a deadline does)."""
    whole = json.dumps(payload).encode()
    ends = None if for_s is None else time.monotonic() + for_s
    try:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(whole)))
        handler.end_headers()
        for index in range(len(whole)):
            if closing.wait(every_s) or (ends is not None and time.monotonic() >= ends):
                break
            handler.wfile.write(whole[index : index + 1])
            handler.wfile.flush()
    except (BrokenPipeError, ConnectionResetError):
        pass


# --------------------------------------------------------------------------------------------- Tavily

# Faults on top of the modes tests/retrieval's handler knows ("malformed", "429", "500", "502", "503", "403", "400",
# "echo_key", "slow", ...); "reset" closes the connection unanswered, "timeout" holds it `hang_s` seconds, "trickle"
# sends a 200 a byte every `trickle_s` seconds (a read timeout never fires) and hangs up after `hang_s`.
TAVILY_FAULTS = (
    "malformed",
    "429",
    "500",
    "502",
    "503",
    "403",
    "400",
    "echo_key",
    "reset",
    "timeout",
    "trickle",
    "not_json_list",
)
_OWN_TAVILY_FAULTS = ("reset", "timeout", "trickle")
_TRICKLED_RESULTS = {"query": "q", "results": [{"url": "https://www.nih.gov/x", "content": "text"}]}


class FakeTavilyServer:
    """tests/retrieval's documented Tavily fake on 127.0.0.1, with ``inject(kind, times=N)`` (see the module doc)."""

    def __init__(self, *, hang_s: float = 3.0, trickle_s: float = 0.2) -> None:
        self.state = FakeTavily()
        self.key = TAVILY_KEY
        self.hang_s = hang_s
        self.trickle_s = trickle_s
        self._own: list[str] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        owner = self
        base = _handler(self.state)

        class Handler(base):  # type: ignore[misc, valid-type]
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                with owner._lock:
                    kind = owner._own.pop(0) if owner._own and owner._own[0] in _OWN_TAVILY_FAULTS else None
                if kind is None:
                    return super().do_POST()
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.close_connection = True
                if kind == "trickle":
                    return trickle(self, _TRICKLED_RESULTS, owner.trickle_s, owner._closing, for_s=owner.hang_s)
                if kind == "timeout":
                    owner._closing.wait(owner.hang_s)
                    return None
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return None

        self._server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def inject(self, kind: str, *, times: int = 1) -> None:
        """Answer the next `times` searches with fault `kind` (one of `TAVILY_FAULTS`)."""
        if kind not in TAVILY_FAULTS:
            raise ValueError(f"unknown Tavily fault {kind!r}; one of {', '.join(TAVILY_FAULTS)}")
        with self._lock:
            if kind in _OWN_TAVILY_FAULTS:
                self._own.extend([kind] * times)
            elif kind == "429":
                self.state.retry_after = "0"
                self.state.throttled += times
            else:
                self.state.script.extend([{"not_json_list": "results_not_list"}.get(kind, kind)] * times)

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeTavilyServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def fake_questions_gold(questions: Sequence[Any]) -> dict[str, str]:
    """The `gold` map of `FakeOpenAI` for these `Question`s: question text -> gold letters ("A" or "A,C")."""
    return {q.text.strip(): ",".join(q.gold_letters or []) or (q.gold_text or "") for q in questions}
