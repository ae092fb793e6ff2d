"""The one HTTP client of clearmed's own requests: a session factory, and `request` with the retry policy.

DSPy makes the LM calls; what clearmed sends itself goes through here: the option scorer's ``/chat/completions``, the
context-window and capability probes and the token counter (`clearmed.backbones`), and `clearmed doctor`'s check of
an endpoint. Tavily's client takes a session
from `guarded_session` too (`clearmed.retrieval.tavily`).

- `guarded_session`: a ``requests.Session`` whose pooled connections a bounded attempt's deadline reaches
  (`clearmed.core.deadlines.guard_socket`): a reused keep-alive connection is marked as the attempt's, as a new one is
  when it connects. `request` keeps one per thread (requests does not promise a session is thread-safe).
- `request`: one request, retried by clearmed's policy (`clearmed.core.retries.retrying`): a status in ``retried``, a
  timeout or a dropped connection (and, with ``want_json``, a 200 whose body is not JSON) is retried ``retries`` times
  with the backoff, each retry counted under ``"lm"``. A reply after the retries is returned as it came (`Reply`), a
  request that never got one raises `NoReply`. With a ``service`` named, a refused connection or an unknown host before
  the endpoint ever answered is the run-stopping `FatalServiceError` (`clearmed.core.endpoints`); any reply marks the
  endpoint reached.
- `fatal_cause`: the refusals of an LM provider's reply that no retry mends (a refused key, an exhausted balance, a
  missing model), the same the LM client stops a run on (`clearmed.backbones.fatal_errors`), read from the status and
  an OpenAI-shaped error body; its callers pass it as ``final`` and raise `FatalServiceError`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

import requests
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from clearmed.core.deadlines import DeadlineExceeded, bounded_call, guard_socket
from clearmed.core.endpoints import connect_failure, mark_reached, unreachable_error
from clearmed.core.errors import FatalCause
from clearmed.core.retries import pause, retry_hint_s, retrying

__all__ = ["RETRIED_STATUS", "NoReply", "Reply", "after_retries", "fatal_cause", "guarded_session", "request"]

# Answers a later attempt may not meet (the LM client's transient set, by HTTP status).
RETRIED_STATUS: Final = frozenset({408, 429, 500, 502, 503, 504})
# Retries are counted under the LM's name: they are the backbone's requests.
_SERVICE: Final = "lm"


@dataclass(frozen=True)
class Reply:
    """An HTTP reply: its status, its JSON (None when the body is not JSON), its text and headers, and how many retries
    it took."""

    status: int
    payload: Any
    text: str
    headers: Mapping[str, str] = field(default_factory=dict)
    retries: int = 0

    def error_text(self) -> str:
        """The server's own message: an OpenAI-shaped ``{"error": {"message"}}`` (or vLLM's older top-level one), else
        the body's start."""
        if self.payload is None:
            return self.text[:200]
        error = self.payload.get("error", self.payload) if isinstance(self.payload, dict) else self.payload
        message = error.get("message", error) if isinstance(error, dict) else error
        return str(message)[:200]


def after_retries(retries: int) -> str:
    """What a failure's message adds about the retries a reply took: `` (after 3 retries)``, nothing for none."""
    return f" (after {retries} retries)" if retries else ""


class NoReply(Exception):
    """No reply came (a timeout, a connection failure), after ``retries`` retries."""

    def __init__(self, why: str, retries: int) -> None:
        super().__init__(why)
        self.why = why
        self.retries = retries


class _Again(Exception):
    """A reply the policy retries (a busy status, a 200 that is no JSON); the last one is returned as it came."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(f"HTTP {reply.status}")
        self.reply = reply


class _GuardReused(HTTPConnectionPool):
    """A pool whose reused connection is marked as the bounded attempt's (a new one is marked as it connects)."""

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)
        sock = getattr(conn, "sock", None)  # urllib3's HTTPConnection; None until it connects
        if sock is not None:
            guard_socket(sock)
        return conn


class _GuardedHTTPSPool(_GuardReused, HTTPSConnectionPool):
    pass


class _GuardedAdapter(requests.adapters.HTTPAdapter):
    """requests' adapter over `_GuardReused` pools, so a deadline reaches a keep-alive connection too."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _GuardReused, "https": _GuardedHTTPSPool}


def guarded_session() -> requests.Session:
    """A new session whose connections, new or reused, a bounded attempt's deadline can end."""
    session = requests.Session()
    for scheme in ("http://", "https://"):
        session.mount(scheme, _GuardedAdapter())
    return session


_local = threading.local()


def _session() -> requests.Session:
    session: requests.Session | None = getattr(_local, "session", None)
    if session is None:
        session = _local.session = guarded_session()
    return session


def request(
    method: str,
    url: str,
    *,
    timeout: float,
    api_key: str | None = None,
    body: dict[str, Any] | None = None,
    retries: int = 0,
    retried: frozenset[int] = RETRIED_STATUS,
    want_json: bool = False,
    bounded: bool = False,
    service: str | None = None,
    retry_no_reply: bool = True,
    final: Callable[[Reply], bool] | None = None,
    headers: Mapping[str, str] | None = None,
    files: Mapping[str, tuple[str, bytes, str]] | None = None,
    data: Mapping[str, str] | bytes | None = None,
) -> Reply:
    """One request by the policy in the module docstring (``retry_no_reply=False``: a request that got no reply is not
    retried, for a probe that is asked again later anyway; ``final``: a reply returned at once whatever its status, such
    as an exhausted quota sent as a 429). ``bounded``: ``timeout`` bounds each attempt in total
    (`clearmed.core.deadlines.bounded_call`), not only the wait for the next byte. ``service`` names the endpoint's owner
    in the fatal error a never-reached endpoint's refusal raises; without it that refusal is a `NoReply` like any.
    ``headers``: more headers (a provider that takes its key in its own header). Instead of ``body``: ``data`` alone, a
    body sent as it is (bytes whose size the caller counted; its Content-Type in ``headers``); ``files`` and ``data``, a
    multipart form (name -> (file name, content, content type), and its plain fields)."""
    sent = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    sent.update(headers or {})

    def once() -> Reply:
        def send() -> requests.Response:
            if files is not None or data is not None:  # as given; a multipart form's boundary is requests'
                return _session().request(method, url, files=files, data=data, headers=sent, timeout=timeout)
            return _session().request(method, url, json=body, headers=sent, timeout=timeout)

        try:
            response = bounded_call(send, timeout) if bounded else send()
        except (requests.RequestException, DeadlineExceeded) as exc:
            fatal = unreachable_error(service, url, exc) if service else None
            if fatal is not None:
                raise fatal from None
            failure = connect_failure(exc)
            why = {"refused": "connection refused", "not_found": "host not found"}[failure] if failure else ""
            raise NoReply(why or type(exc).__name__, 0) from exc
        mark_reached(url)
        try:
            payload = response.json()
        except ValueError:
            payload = None
        reply = Reply(response.status_code, payload, response.text, dict(response.headers))
        if final is not None and final(reply):
            return reply
        if reply.status in retried or (want_json and reply.status == 200 and payload is None):
            raise _Again(reply)
        return reply

    policy = retrying(
        _SERVICE,
        retries,
        transient=lambda exc: isinstance(exc, _Again) or (retry_no_reply and isinstance(exc, NoReply)),
        hint=lambda exc: retry_hint_s(exc.reply.headers) if isinstance(exc, _Again) else None,
        sleep=lambda seconds: pause(seconds),  # looked up at each wait: tests replace it
    )
    try:
        return policy(once)
    except _Again as again:  # still busy after the retries: the caller reads the status
        return replace(again.reply, retries=int(policy.statistics.get("attempt_number", 1)) - 1)
    except NoReply as failed:
        raise NoReply(failed.why, int(policy.statistics.get("attempt_number", 1)) - 1) from failed.__cause__


def fatal_cause(reply: Reply) -> FatalCause | None:
    """A provider's refusal that no retry mends, read from the reply's status and OpenAI-shaped error body: a refused
    key, an exhausted balance (also sent as a 429), a missing model (a 404); None for any other reply."""
    error = reply.payload.get("error") if isinstance(reply.payload, dict) else None
    code = str(error.get("code") or error.get("type") or "") if isinstance(error, dict) else ""
    if reply.status in (401, 403) or code == "invalid_api_key":
        return "auth"
    if reply.status == 402 or code in ("insufficient_quota", "billing_hard_limit_reached"):
        return "billing"
    if reply.status == 404:
        return "model_not_found"
    return None
