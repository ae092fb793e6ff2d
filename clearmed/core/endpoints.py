"""Endpoints this process has reached, and the refused connection that stops a run before it reached its endpoint.

A connection refused, or a host name that does not resolve, means something different before and after an endpoint's
first answer. Before it, the address is wrong or the server was never started: every question would fail the same way,
so the clients raise `unreachable_error`'s `FatalServiceError` and the run stops with one line naming the endpoint
(``scheme://host:port``, never a path, a query or credentials). After it, the same refusal is a server restarting: a
transient failure, retried and recorded like a timeout.

An endpoint counts as reached once any HTTP reply came from it (an error status included: something answered). The
record is per process and each run starts it afresh (`clearmed.api.evaluate`), so a suite's next cell against a
server that went away since stops as a run of its own would.
"""

from __future__ import annotations

import re
import socket
import threading
from typing import Literal
from urllib.parse import urlsplit

from clearmed.core.errors import FatalServiceError

__all__ = [
    "ConnectFailure",
    "connect_failure",
    "endpoint_of",
    "endpoints_named",
    "forget_reached",
    "has_reached",
    "mark_reached",
    "unreachable_error",
]

ConnectFailure = Literal["refused", "not_found"]
_DEFAULT_PORTS = {"http": 80, "https": 443}
# How far down an exception's causes to look (DSPy's LMTransportError -> lm15 errors -> ConnectionRefusedError is 4).
_MAX_DEPTH = 8

# An endpoint as `endpoint_of` writes it, inside a sentence.
_NAMED = re.compile(r"\b[a-z][a-z0-9+.-]*://(?:\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d+")

_reached: set[str] = set()
_lock = threading.Lock()


def endpoint_of(url: str) -> str:
    """``scheme://host:port`` of ``url`` (the scheme's default port when none is written): what names an endpoint."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    scheme = parts.scheme or "http"
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: keep the address as written, without credentials
        port = None
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    return f"{scheme}://{host}:{port or _DEFAULT_PORTS.get(scheme, 80)}"


def endpoints_named(text: str) -> list[str]:
    """The endpoints (``scheme://host:port``, as `endpoint_of` writes them) a message names, each once, in order: an LM
    failure names the endpoint it came from (`clearmed.backbones.client`), so a degraded question says where."""
    return list(dict.fromkeys(_NAMED.findall(text)))


def mark_reached(url: str) -> None:
    """``url``'s endpoint answered: from now on a refused connection there is transient."""
    endpoint = endpoint_of(url)
    with _lock:
        _reached.add(endpoint)


def has_reached(url: str) -> bool:
    with _lock:
        return endpoint_of(url) in _reached


def forget_reached() -> None:
    """Forget every endpoint reached (tests, or a process starting a run against servers it met before)."""
    with _lock:
        _reached.clear()


def connect_failure(exc: BaseException) -> ConnectFailure | None:
    """ "refused" or "not_found" when ``exc`` (or an exception it was raised from) is a refused connection or a host
    name that did not resolve; None for anything else (a timeout, a reset connection, an HTTP error)."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending and len(seen) < _MAX_DEPTH:
        error = pending.pop()
        if id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, ConnectionRefusedError):
            return "refused"
        if isinstance(error, socket.gaierror):
            return "not_found"
        # urllib3 keeps the failure on ``reason`` (MaxRetryError); requests passes it as its first argument.
        linked = [error.__cause__, error.__context__, getattr(error, "reason", None), *error.args[:1]]
        pending.extend(e for e in linked if isinstance(e, BaseException))
    return None


def unreachable_error(service: str, url: str, exc: BaseException) -> FatalServiceError | None:
    """The `FatalServiceError` a failed connection to ``url`` means, or None: a refused connection or an unknown host
    before the endpoint ever answered stops the run; after it (or any other failure) the caller's policy applies."""
    failure = connect_failure(exc)
    if failure is None or has_reached(url):
        return None
    endpoint = endpoint_of(url)
    if failure == "refused":
        detail = f"{endpoint} refused the connection before any reply (is the server up, and the address right?)"
    else:
        detail = f"host not found: {endpoint} (check the address and the network)"
    return FatalServiceError(service, "unreachable", detail)
