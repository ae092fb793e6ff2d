"""A batch run's LM calls: answered from the provider's batch results, or queued for the next batch (`eval --batch`).

A batch run (`clearmed.batch.run`) runs every unfinished question until its next LM call misses the cache,
then sends the calls that missed as provider batches, and runs again. This module is the point where a call misses:
DSPy's native engine (lm15) builds the request exactly as a synchronous call would and hands it to its transport's
``_send``; while a `BatchPass` is active, `_send` asks the pass first (`install_batch_calls`, once per process):

- a call whose batch line has answered gets that line's response as its HTTP reply, so lm15 parses it and DSPy caches
  it under exactly the key the synchronous call would have (the next pass then meets a plain cache hit);
- a call with no answer yet is queued (`BatchPass.pending`) and raises `core.errors.CallDeferred`, which stops its
  question without a record;
- a line that failed (an error status, or an error-file entry) is queued again until it has failed as often as the
  backbone's retries allow; then its error is the reply, and the stage fails and is degraded as a synchronous call's
  would be;
- a URL no batch client serves (the embedded engine never gets here; a judge on a local server does) is sent at once.

The scored-option pass (`backbones.logprobs.OpenAICompatibleScorer`) asks `serve` the same way before posting.
A line is named by the URL and the canonical JSON of its body (`line_key`), so the same request made by two
questions, or by a rerun after a kill, is one line.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from clearmed.core.errors import CallDeferred

__all__ = [
    "BatchPass",
    "LineAnswers",
    "batch_pass",
    "install_batch_calls",
    "line_key",
    "served_reply",
]

# Hex digits of a line's key: 160 bits, within every provider's custom_id limit (Anthropic: 64 characters).
_KEY_DIGITS = 40


def line_key(url: str, body: Mapping[str, Any]) -> str:
    """A request's name as a batch line (its ``custom_id``): the URL and the body's canonical JSON, hashed."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{url}\n{canonical}".encode("utf-8", "replace")).hexdigest()[:_KEY_DIGITS]


class LineAnswers(Protocol):
    """What the run folder knows of a line (`batch.store.BatchStore`)."""

    def answer(self, key: str) -> tuple[int, dict[str, Any]] | None:
        """The line's reply (status, body) when it answered (a 200), else None."""

    def failures(self, key: str) -> tuple[int, tuple[int, dict[str, Any]] | None]:
        """How often the line failed in this run, and its last failure as a reply (None: no reply to show)."""

    def in_flight(self, key: str) -> bool:
        """The line is in a batch submitted and not yet collected."""


class BatchPass:
    """One pass of a batch run: the calls answered from its batches, and those queued for the next (`pending`).

    ``batched(url)`` says whether a URL is served by one of the run's batch clients; ``retries`` is how often a failed
    line is sent again (the backbone's ``num_retries``)."""

    def __init__(self, answers: LineAnswers, batched: Callable[[str], bool], *, retries: int) -> None:
        self.answers = answers
        self.batched = batched
        self.retries = retries
        self.pending: dict[str, tuple[str, dict[str, Any]]] = {}  # key -> (url, body)
        self.served = 0
        self.deferred = 0
        self._lock = threading.Lock()

    def serve(self, url: str, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """The reply to send back for this request, or None to send it as it is (a URL not batched); raises
        `CallDeferred` when it is queued for the next batch."""
        if not self.batched(url):
            return None
        key = line_key(url, body)
        answered = self.answers.answer(key)
        if answered is not None:
            with self._lock:
                self.served += 1
            return answered
        failed, last = self.answers.failures(key)
        if failed > self.retries and last is not None:  # out of retries: the stage fails as a synchronous one would
            with self._lock:
                self.served += 1
            return last
        with self._lock:
            self.deferred += 1
            if not self.answers.in_flight(key):
                self.pending.setdefault(key, (url, dict(body)))
        raise CallDeferred(url)


# The batch pass of this process's run, if one is running: a module global, not a context variable, so the question
# and pathway threads all see it (one run per process).
_ACTIVE: BatchPass | None = None
_ACTIVE_LOCK = threading.Lock()


class batch_pass:
    """Make ``pass_`` the active pass for the block (`install_batch_calls` first)."""

    def __init__(self, pass_: BatchPass) -> None:
        self.pass_ = pass_

    def __enter__(self) -> BatchPass:
        global _ACTIVE
        install_batch_calls()
        with _ACTIVE_LOCK:
            if _ACTIVE is not None:
                raise RuntimeError("a batch pass is already running in this process")
            _ACTIVE = self.pass_
        return self.pass_

    def __exit__(self, *exc: object) -> None:
        global _ACTIVE
        with _ACTIVE_LOCK:
            _ACTIVE = None


def served_reply(url: str, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """For a client that sends its own requests (the scored-option pass): the active pass's reply, or None to send."""
    active = _ACTIVE
    return active.serve(url, body) if active is not None else None


_installed = False
_INSTALL_LOCK = threading.Lock()


def install_batch_calls() -> bool:
    """Make DSPy's native providers ask the active batch pass before sending a POST (once per process); outside a pass
    they send as ever. False when this DSPy has no such provider base (a batch run then refuses to start)."""
    global _installed
    with _INSTALL_LOCK:
        if _installed:
            return True
        try:
            # By name, as `native_sockets` does: a static import of lm15 makes mypy analyse the untyped dspy package.
            base = importlib.import_module("dspy._vendor.lm15.providers.base")
            provider_class, response_class = base.BaseProviderLM, base.HttpResponse
        except (ImportError, AttributeError):
            return False
        original = provider_class.__dict__.get("_send")
        if not callable(original):
            return False

        def _send(self: Any, request: Any, _original: Any = original) -> Any:
            active = _ACTIVE
            if active is None or getattr(request, "method", "") != "POST":
                return _original(self, request)
            try:
                body = json.loads(request.body or b"{}")
            except ValueError:
                return _original(self, request)
            served = active.serve(str(request.url), body) if isinstance(body, dict) else None
            if served is None:
                return _original(self, request)
            status, reply = served
            return response_class(
                status=status,
                reason="OK" if status < 400 else "Error",
                headers=[("content-type", "application/json")],
                body=json.dumps(reply).encode("utf-8"),
                provider=getattr(self, "provider", None),
            )

        provider_class._send = _send
        _installed = True
        return True
