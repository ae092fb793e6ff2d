"""A cached reply is one endpoint's: DSPy's cache keyed by the endpoint a `ClearmedLM` call went to.

DSPy's cache key leaves ``api_base`` out (`dspy.clients.execution`'s ``IGNORED_CACHE_KEYS``), so two servers of one
model name shared their replies: a second server, dead or another model, was never asked. Each call's key holds its
endpoint (`cache_endpoint`; `install_endpoint_cache_keys`, once per process), and each attempt of a call runs in an
`endpoint_scope` that counts its cache hits, so a reply served from the cache marks nothing reached
(`clearmed.core.endpoints`: only a server's reply does). The client is `backbones.client`.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final
from urllib.parse import urlsplit

from clearmed.core.endpoints import endpoint_of

__all__ = ["CACHE_ENDPOINT_FIELD", "CallScope", "cache_endpoint", "endpoint_scope", "install_endpoint_cache_keys"]


class CallScope:
    """One attempt of a `ClearmedLM` call: the endpoint its cache keys hold, and how many cache lookups it hit."""

    __slots__ = ("endpoint", "hits")

    def __init__(self, endpoint: str | None) -> None:
        self.endpoint = endpoint
        self.hits = 0


_SCOPE: ContextVar[CallScope | None] = ContextVar("clearmed_lm_call", default=None)


@contextmanager
def endpoint_scope(endpoint: str | None) -> Iterator[CallScope]:
    """DSPy's cache keys (and counts the hits of) the calls made inside the block by ``endpoint`` (None: as DSPy
    makes them)."""
    scope = CallScope(endpoint)
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


# The field an endpoint adds to a DSPy cache request (and to a scored answer's: `programs.pathways.scored_answer`).
CACHE_ENDPOINT_FIELD: Final = "clearmed_endpoint"
_keys_installed = False
_KEYS_LOCK = threading.Lock()


def cache_endpoint(lm: object) -> str | None:
    """The endpoint an LM's replies are cached under: its ``api_base`` as `core.endpoints.endpoint_of` names it
    (``scheme://host:port``, no credentials), with its path (a gateway routes ``/a/v1`` and ``/b/v1`` to different
    servers) and no query or trailing slash; None for an LM with no address of its own (the embedded engine, a hosted
    provider's default address), whose keys are as DSPy makes them."""
    kwargs = getattr(lm, "kwargs", None)
    base = (kwargs.get("api_base") or kwargs.get("base_url")) if isinstance(kwargs, dict) else None
    if not base:
        return None
    text = str(base)
    path = urlsplit(text if "://" in text else f"http://{text}").path.rstrip("/")
    return f"{endpoint_of(text)}{path}"


def install_endpoint_cache_keys() -> None:
    """Make DSPy's cache (every `dspy.clients.cache.Cache`, so a `dspy.configure_cache` one too; once per process)
    key a call made inside a `ClearmedLM` attempt by its endpoint as well (`CACHE_ENDPOINT_FIELD`), and count the
    attempt's cache hits. Outside an attempt, keys are DSPy's own."""
    global _keys_installed
    with _KEYS_LOCK:
        if _keys_installed:
            return
        cache_class = importlib.import_module("dspy.clients.cache").Cache
        original_key = cache_class.__dict__["cache_key"]
        original_get = cache_class.__dict__["get"]

        # DSPy's own parameter names: callers pass ``ignored_args_for_cache_key`` by keyword.
        def cache_key(self: Any, request: dict[str, Any], ignored_args_for_cache_key: list[str] | None = None) -> str:
            scope = _SCOPE.get()
            if scope is not None and scope.endpoint is not None and isinstance(request, dict):
                request = {**request, CACHE_ENDPOINT_FIELD: scope.endpoint}
            return str(original_key(self, request, ignored_args_for_cache_key))

        def get(self: Any, request: dict[str, Any], ignored_args_for_cache_key: list[str] | None = None) -> Any:
            value = original_get(self, request, ignored_args_for_cache_key)
            scope = _SCOPE.get()
            if value is not None and scope is not None:
                scope.hits += 1
            return value

        cache_class.cache_key = cache_key
        cache_class.get = get
        _keys_installed = True
