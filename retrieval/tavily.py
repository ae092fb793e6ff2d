"""`TavilySearch`: live web search through tavily-python, every failure mapped to an `EvidenceError` kind.

tavily-python runs *keyless* (rate-limited, anonymous) when no key is set instead of failing, so the key is
checked here before any request. The key is read from the environment only, and scrubbed from every message
we raise.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Literal

import requests
from pydantic import BaseModel, ConfigDict, Field
from tavily import BadRequestError, InvalidAPIKeyError, TavilyClient, UsageLimitExceededError
from tavily.errors import ForbiddenError
from tavily.errors import TimeoutError as TavilyTimeoutError

from clearmed.retrieval.base import EvidenceError, SearchFailure
from clearmed.retrieval.corpus import domain_of, parse_date
from clearmed.signatures.records import Passage, Provenance

BACKEND = "tavily"
# Tavily's documented ceiling for max_results.
MAX_RESULTS = 20
# Tavily answers HTTP 400 {"detail": {"error": "Query is too long. Max query length is 400 characters."}}
# beyond this many characters.
MAX_QUERY_CHARS = 400


class TavilyOptions(BaseModel):
    """The `[search.tavily]` table: request options passed to Tavily's /search endpoint."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    search_depth: Literal["basic", "advanced", "fast", "ultra-fast"] = "advanced"
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


class TavilySearch:
    """Implements `WebSearch` with Tavily; one client (one requests Session) per instance."""

    def __init__(
        self, options: TavilyOptions | None = None, *, timeout: float = 20.0, max_query_chars: int = MAX_QUERY_CHARS
    ) -> None:
        self.name = BACKEND
        self.max_query_chars: int | None = max_query_chars
        self.options = options or TavilyOptions()
        self.timeout = timeout
        self._client: TavilyClient | None = None
        self._client_key: str | None = None

    def api_key(self) -> str:
        """The key from the environment, or `EvidenceError(kind="no_key")` before any network access."""
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
            self._client = TavilyClient(api_key=key, api_base_url=self.options.api_base_url)
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
        try:
            response = client.search(query, max_results=count, timeout=self.timeout, **self.options.request_params())
        except Exception as exc:
            kind, message = _classify(exc, self.timeout)
            raise EvidenceError(_scrub(message, key), kind=kind, backend=BACKEND) from None
        return self._to_passages(response, query, count)

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


def _classify(exc: Exception, timeout: float) -> tuple[SearchFailure, str]:
    detail = str(exc).strip()
    suffix = f": {detail}" if detail else ""
    if isinstance(exc, InvalidAPIKeyError):
        return "auth", f"Tavily rejected the API key (HTTP 401){suffix}; check TAVILY_API_KEY"
    if isinstance(exc, UsageLimitExceededError):
        return (
            "rate_limit",
            f"Tavily rate or usage limit exceeded (HTTP 429){suffix}; retry later or raise the plan",
        )
    if isinstance(exc, ForbiddenError):
        return "forbidden", f"Tavily refused the request (HTTP 403){suffix}"
    if isinstance(exc, BadRequestError):
        return "bad_request", f"Tavily rejected the request as invalid (HTTP 400){suffix}"
    if isinstance(exc, TavilyTimeoutError | requests.Timeout):
        return "timeout", f"Tavily did not answer within {timeout:g} s"
    if isinstance(exc, requests.HTTPError):
        status = exc.response.status_code if exc.response is not None else None
        if status is not None and status >= 500:
            return "server", f"Tavily server error (HTTP {status}); retry later"
        return "other", f"Tavily answered HTTP {status}"
    if isinstance(exc, requests.ConnectionError):
        return "connection", "could not connect to the Tavily API (network down or api_base_url wrong)"
    if isinstance(exc, ValueError):  # requests' JSONDecodeError: a 200 whose body is not JSON
        return "bad_response", "Tavily answered with a body that is not valid JSON"
    return "other", f"Tavily search failed ({type(exc).__name__}){suffix}"


def _scrub(message: str, key: str) -> str:
    return message.replace(key, "***") if key else message
