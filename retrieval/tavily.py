"""`TavilySearch`: live web search through tavily-python, retried when Tavily is busy, stopped when it refuses.

Tavily's documented errors (docs.tavily.com, ``POST /search``) and what a search does with each:

- 429 rate limit (tavily-python raises ``UsageLimitExceededError`` despite the name), 5xx, timeouts, dropped
  connections and a 200 whose body is not JSON (a proxy's error page, a cut connection) are transient: retried up to ``max_retries`` times with tenacity, waiting ``Retry-After`` when Tavily
  sends it, else exponential backoff with jitter (`clearmed.core.retries`), each retry counted in `count_retries()`;
- 401 (bad or revoked key), 403, 432 (plan or key limit) and 433 (pay-as-you-go limit) will fail every later search
  too: raised as `clearmed.core.errors.FatalServiceError`, so a run stops instead of answering without evidence;
- anything else (400 such as a query over 400 characters, JSON without a results list, retries exhausted) is an
  `EvidenceError` with a `kind`, which the pathway records (transient kinds degrade the question).

A connection refused, or a host not found, before Tavily's endpoint ever answered is a `FatalServiceError` too (a wrong
``api_base_url``: `clearmed.core.endpoints`); after an answer it is a dropped connection, retried.

A search's ``timeout`` bounds each attempt in total (`clearmed.core.deadlines.bounded_call`), not only the wait for the
next byte: a server trickling its reply cannot hold a search past it. The session (`clearmed.core.http.guarded_session`)
marks each pooled connection a search reuses as the attempt's, so the deadline can end a read on it.

tavily-python runs *keyless* (rate-limited, anonymous) when no key is set instead of failing, so the key is checked
here before any request. The key is read from the environment only, and scrubbed from every message we raise.
A search costs `search_credits(search_depth)` Tavily credits.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Final, Literal

import requests
from pydantic import BaseModel, ConfigDict, Field
from tavily import BadRequestError, InvalidAPIKeyError, TavilyClient, UsageLimitExceededError
from tavily.errors import ForbiddenError
from tavily.errors import TimeoutError as TavilyTimeoutError

from clearmed.core.deadlines import DeadlineExceeded, bounded_call
from clearmed.core.endpoints import mark_reached, unreachable_error
from clearmed.core.errors import FatalCause, FatalServiceError
from clearmed.core.http import guarded_session
from clearmed.core.retries import (
    note_credits,
    retry_hint_s,
    retrying,
)
from clearmed.core.sanitize import register_secret_env
from clearmed.retrieval.base import EvidenceError, SearchFailure
from clearmed.retrieval.corpus import domain_of, parse_date
from clearmed.signatures.records import Passage, Provenance

BACKEND = "tavily"
SearchDepth = Literal["basic", "advanced", "fast", "ultra-fast"]
# Tavily credits per search, by depth (docs.tavily.com, /search: basic, fast, ultra-fast 1; advanced 2).
SEARCH_CREDITS: Final[dict[str, int]] = {"basic": 1, "fast": 1, "ultra-fast": 1, "advanced": 2}
# Retries of a transient failure before it is recorded: with backoff 0.5-1, 1-2, 2-4 s (or what Tavily asks).
DEFAULT_MAX_RETRIES = 3
# Statuses no retry mends, and what they mean (432: plan or key limit; 433: pay-as-you-go limit).
_FATAL_STATUS: Final[dict[int, FatalCause]] = {401: "auth", 403: "auth", 432: "billing", 433: "billing"}
_FATAL_HINT: Final[dict[FatalCause, str]] = {
    "auth": "check the key in {env}",
    "billing": "raise the plan or the pay-as-you-go limit, or wait for the credits to renew",
}
# Where tavily-python sends a search when no api_base_url is set.
DEFAULT_API_BASE = "https://api.tavily.com"
# Tavily's documented ceiling for max_results.
MAX_RESULTS = 20
# Tavily answers HTTP 400 {"detail": {"error": "Query is too long. Max query length is 400 characters."}}
# beyond this many characters.
MAX_QUERY_CHARS = 400


class TavilyOptions(BaseModel):
    """The `[search.tavily]` table: request options passed to Tavily's /search endpoint."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    search_depth: SearchDepth = "advanced"
    topic: Literal["general", "news", "finance"] = "general"
    time_range: Literal["day", "week", "month", "year"] | None = None
    include_domains: list[str] = Field(default_factory=list)
    exclude_domains: list[str] = Field(default_factory=list)
    country: str | None = None
    include_raw_content: bool = False
    # Where the API lives; tests point it at a fake server on 127.0.0.1.
    api_base_url: str | None = None
    # The environment variable holding the key (never the key itself: keys do not belong in config files).
    api_key_env: str = "TAVILY_API_KEY"

    def request_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"search_depth": self.search_depth, "topic": self.topic}
        if self.time_range:
            params["time_range"] = self.time_range
        if self.include_domains:
            params["include_domains"] = list(self.include_domains)
        if self.exclude_domains:
            params["exclude_domains"] = list(self.exclude_domains)
        if self.country:
            params["country"] = self.country
        if self.include_raw_content:
            params["include_raw_content"] = True
        return params


def search_credits(depth: str) -> int:
    """Tavily credits one search at this depth costs."""
    return SEARCH_CREDITS[depth]


class TavilySearch:
    """Implements `WebSearch` with Tavily; one client (one requests Session) per instance."""

    def __init__(
        self,
        options: TavilyOptions | None = None,
        *,
        timeout: float = 20.0,
        max_query_chars: int = MAX_QUERY_CHARS,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        self.name = BACKEND
        self.max_query_chars: int | None = max_query_chars
        self.options = options or TavilyOptions()
        self.timeout = timeout
        self.max_retries = max_retries
        self._client: TavilyClient | None = None
        self._client_key: str | None = None

    @property
    def credits_per_search(self) -> int:
        return search_credits(self.options.search_depth)

    def api_key(self) -> str:
        """The key from the environment, or `EvidenceError(kind="no_key")` before any network access."""
        register_secret_env(self.options.api_key_env)  # masked by value wherever text is written
        key = os.environ.get(self.options.api_key_env, "").strip()
        if not key:
            raise EvidenceError(
                f"Tavily web search needs an API key: set the {self.options.api_key_env} environment "
                "variable (or use search backend 'offline' / 'none')",
                kind="no_key",
                backend=BACKEND,
            )
        return key

    def _get_client(self) -> tuple[TavilyClient, str]:
        key = self.api_key()
        if self._client is None or key != self._client_key:
            # Our own session, so a response hook can keep what tavily-python's exceptions drop: the status
            # (403, 432 and 433 all arrive as ForbiddenError) and the Retry-After header.
            session = guarded_session()
            session.hooks["response"].append(_remember_response)
            self._client = TavilyClient(api_key=key, api_base_url=self.options.api_base_url, session=session)
            self._client_key = key
        return self._client, key

    def cache_params(self) -> dict[str, object]:
        return self.options.model_dump(exclude={"api_key_env", "api_base_url"})

    def search(self, query: str, max_results: int) -> list[Passage]:
        if not query.strip():
            raise EvidenceError("empty search query", kind="bad_request", backend=BACKEND)
        if self.max_query_chars is not None and len(query) > self.max_query_chars:
            # Callers shorten queries first (and record it); sending this would only earn an HTTP 400.
            raise EvidenceError(
                f"query of {len(query)} characters is longer than Tavily accepts ({self.max_query_chars}); not sent",
                kind="bad_request",
                backend=BACKEND,
            )
        if max_results <= 0:
            return []
        client, key = self._get_client()
        count = min(max_results, MAX_RESULTS)
        policy = retrying(
            BACKEND,
            self.max_retries,
            transient=_is_transient,
            hint=lambda exc: retry_hint_s(exc.headers) if isinstance(exc, _Failed) else None,
            sleep=lambda seconds: _sleep(seconds),
        )
        try:
            response = policy(self._search_once, client, query, count)
        except _Failed as failed:
            raise self._error(failed, key, retries=policy.statistics.get("attempt_number", 1) - 1) from None
        note_credits(BACKEND, self.credits_per_search)  # billed once it answered (a cache hit never gets here)
        return self._to_passages(response, query, count)

    def _search_once(self, client: TavilyClient, query: str, count: int) -> Any:
        _LAST_RESPONSE.set(None)
        try:
            return bounded_call(
                lambda: client.search(query, max_results=count, timeout=self.timeout, **self.options.request_params()),
                self.timeout,
            )
        except Exception as exc:
            seen = _LAST_RESPONSE.get()
            if seen is None:  # a refused connection before Tavily ever answered: a wrong address, never retried
                fatal = unreachable_error("Tavily", self.options.api_base_url or DEFAULT_API_BASE, exc)
                if fatal is not None:
                    raise fatal from None
            raise _Failed(exc, *(seen or (None, {}))) from exc

    def _error(self, failed: _Failed, key: str, *, retries: int) -> Exception:
        status = failed.status
        cause = _FATAL_STATUS.get(status) if status is not None else None
        if cause is None and isinstance(failed.error, InvalidAPIKeyError):
            cause = "auth"
        elif cause is None and isinstance(failed.error, ForbiddenError):
            cause = "billing"  # tavily-python's name for 403/432/433; no status seen: the plan limits are likeliest
        if cause is not None:
            detail = str(failed.error).strip().rstrip(".")
            hint = _FATAL_HINT.get(cause, "").format(env=self.options.api_key_env)
            text = "; ".join(part for part in (detail, hint) if part)
            return FatalServiceError("Tavily", cause, _scrub(text, key), status=status)
        kind, message = _classify(failed.error, self.timeout)
        if retries:
            message += f" (after {retries} {'retry' if retries == 1 else 'retries'})"
        return EvidenceError(_scrub(message, key), kind=kind, backend=BACKEND)

    def _to_passages(self, response: Any, query: str, count: int) -> list[Passage]:
        if not isinstance(response, dict) or not isinstance(response.get("results"), list):
            raise EvidenceError(
                f"Tavily returned an unexpected response (no 'results' list) for query {query!r}",
                kind="bad_response",
                backend=BACKEND,
            )
        out: list[Passage] = []
        for item in response["results"]:
            # A result without URL or text cannot be cited or judged; skip it rather than fail the whole
            # search.
            if not isinstance(item, dict) or not item.get("url") or not (item.get("content") or "").strip():
                continue
            url = str(item["url"])
            score = item.get("score")
            provenance = Provenance(
                kind="web",
                url=url,
                domain=domain_of(url),
                published=parse_date(item.get("published_date")),
                backend=BACKEND,
                query=query,
                rank=len(out) + 1,
                score=float(score) if isinstance(score, int | float) else None,
            )
            out.append(
                Passage(
                    id=f"tavily:{hashlib.sha1(url.encode('utf-8')).hexdigest()[:10]}",
                    title=str(item.get("title") or ""),
                    text=str(item["content"]).strip(),
                    pathway="dynamic",
                    provenance=provenance,
                )
            )
            if len(out) == count:
                break
        if response["results"] and not out:
            raise EvidenceError(
                f"Tavily returned {len(response['results'])} results for {query!r} but none had a URL and text",
                kind="bad_response",
                backend=BACKEND,
            )
        return out


class _Failed(Exception):
    """One failed request, with what tavily-python's exception leaves out: the HTTP status and headers."""

    def __init__(self, error: Exception, status: int | None, headers: dict[str, str]) -> None:
        super().__init__(str(error))
        self.error = error
        self.status = status
        self.headers = headers


# The last response the session saw in this context (a thread or task of its own): set by the hook, read on failure.
_LAST_RESPONSE: ContextVar[tuple[int, dict[str, str]] | None] = ContextVar("clearmed_tavily_response", default=None)


def _remember_response(response: requests.Response, *args: object, **kwargs: object) -> None:
    _LAST_RESPONSE.set((response.status_code, dict(response.headers)))
    mark_reached(response.url)


def _is_transient(exc: BaseException) -> bool:
    """A failure the next attempt may not meet: rate limit (429), server error (5xx), timeout, dropped connection."""
    if not isinstance(exc, _Failed):
        return False
    if exc.status is not None and (exc.status == 429 or exc.status >= 500):
        return True
    error = exc.error
    if isinstance(error, ValueError) and exc.status == 200:  # a body that is not JSON: the next one may be
        return True
    return isinstance(
        error,
        UsageLimitExceededError | TavilyTimeoutError | DeadlineExceeded | requests.Timeout | requests.ConnectionError,
    )


# Module-level so tests can replace the clock.
_sleep: Callable[[float], None] = time.sleep


def _classify(exc: Exception, timeout: float) -> tuple[SearchFailure, str]:
    detail = str(exc).strip()
    suffix = f": {detail}" if detail else ""
    if isinstance(exc, UsageLimitExceededError):
        return "rate_limit", f"Tavily rate limit exceeded (HTTP 429){suffix}"
    if isinstance(exc, BadRequestError):
        return "bad_request", f"Tavily rejected the request as invalid (HTTP 400){suffix}"
    if isinstance(exc, TavilyTimeoutError | DeadlineExceeded | requests.Timeout):
        return "timeout", f"Tavily did not answer within {timeout:g} s"
    if isinstance(exc, requests.HTTPError):
        status = exc.response.status_code if exc.response is not None else None
        if status is not None and status >= 500:
            return "server", f"Tavily server error (HTTP {status}); retry later"
        return "other", f"Tavily answered HTTP {status}"
    if isinstance(exc, requests.ConnectionError):
        return "connection", "could not connect to the Tavily API (network down or api_base_url wrong)"
    if isinstance(exc, ValueError):  # requests' JSONDecodeError: a 200 whose body is not JSON
        return "malformed", "Tavily answered with a body that is not valid JSON"
    return "other", f"Tavily search failed ({type(exc).__name__}){suffix}"


def _scrub(message: str, key: str) -> str:
    return message.replace(key, "***") if key else message
