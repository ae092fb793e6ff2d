"""The two evidence interfaces the pathways depend on, and their failures.

The local pathway asks a `Retriever` (BM25 over a curated corpus); the dynamic pathway asks a `WebSearch`
(Tavily, or an offline page collection). Both return `Passage`s with provenance. A backend that cannot
serve a query raises `EvidenceError`; the pathway records it in the trail instead of crashing.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

from clearmed.signatures.records import Passage

SearchFailure = Literal[
    "no_key",
    "auth",
    "forbidden",
    "rate_limit",
    "timeout",
    "server",
    "connection",
    "bad_response",
    "bad_request",
    "cache_miss",
    "cache",
    "busy",
    "malformed",
    "index",
    "other",
]
# Failures a later attempt may not meet (after the client's own retries): the question is degraded and redone on
# resume. "busy": a cache locked past its busy timeout, or no file descriptor left; "malformed": a 200 whose body is
# not JSON (a proxy's error page, a cut connection).
TRANSIENT_FAILURES: frozenset[SearchFailure] = frozenset(
    {"rate_limit", "timeout", "server", "connection", "busy", "malformed"}
)
# Failures every later search would meet too: a corrupt or unwritable cache or index. The run stops with one line
# (`clearmed.core.errors.FatalServiceError`) rather than answer the rest without that evidence.
FATAL_FAILURES: frozenset[SearchFailure] = frozenset({"cache", "index"})


class EvidenceError(Exception):
    """A retrieval or search backend failed. `kind` is machine-readable; the message is for people."""

    def __init__(self, message: str, *, kind: SearchFailure = "other", backend: str = "") -> None:
        super().__init__(message)
        self.kind: SearchFailure = kind
        self.backend = backend


@runtime_checkable
class Retriever(Protocol):
    """Local retrieval: the top `k` passages of a curated corpus for a query."""

    name: str

    def retrieve(self, query: str, k: int) -> list[Passage]: ...


@runtime_checkable
class WebSearch(Protocol):
    """Dynamic search: up to `max_results` web results for a query, as passages with URL provenance.

    `max_query_chars` is the longest query the backend accepts (Tavily: 400), or None for no limit; callers
    shorten longer queries before searching and record that they did.
    """

    name: str
    max_query_chars: int | None

    def search(self, query: str, max_results: int) -> list[Passage]: ...
