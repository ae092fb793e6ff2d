"""DSPy's native transport made to mark each pooled connection it sends on as the bounded attempt's
(`guard_native_sockets`), so a remote backbone's deadline can end a read on a reused keep-alive connection too.

A connection the attempt opens is marked as it connects (`clearmed.core.deadlines`, by Python's ``socket.connect``
audit event); one DSPy's native engine (lm15) takes from its pool was connected before the attempt began, so its
transport's ``_send_request`` marks it with `deadlines.guard_socket`. `backbones.client.ClearmedLM` installs this
for a remote backbone.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from clearmed.core.deadlines import guard_socket

__all__ = ["guard_native_sockets"]

_guarding = False
_GUARD_LOCK = threading.Lock()


def guard_native_sockets() -> bool:
    """Make DSPy's native transport mark the pooled connection each request is sent on as its bounded attempt's
    (`deadlines.guard_socket`; once per process), so the attempt's deadline can end a read on a reused keep-alive
    connection too. False when this DSPy has no such transport (a new connection is marked as it connects anyway)."""
    global _guarding
    with _GUARD_LOCK:
        if _guarding:
            return True
        try:
            # By name, as `failures.install_error_shapes` does: lm15 ships py.typed and a static import of it makes
            # mypy analyse the untyped dspy package around it.
            transport = importlib.import_module("dspy._vendor.lm15.transports._sync").StdlibTransport
        except (ImportError, AttributeError):
            return False
        original = transport.__dict__.get("_send_request")
        if not callable(original):
            return False

        def _send_request(self: Any, conn: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            sock = getattr(conn, "sock", None)
            if sock is not None:
                guard_socket(sock)
            return _original(self, conn, *args, **kwargs)

        transport._send_request = _send_request
        _guarding = True
        return True
