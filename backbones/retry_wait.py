"""A ceiling on how long a rate-limited call waits before its retry.

DSPy 3.4 sleeps for whatever `Retry-After` a provider sends (`dspy.clients.execution._delay`), so one
response asking for an hour stalls an evaluation for an hour with no sign of life. The ceiling keeps DSPy's
own backoff and honours short hints, but never waits longer than `MAX_RETRY_WAIT_S` per attempt; a provider
that is really down for an hour then fails the call after its retries, and the failure is recorded.
"""

from __future__ import annotations

from collections.abc import Callable

MAX_RETRY_WAIT_S = 60.0

_installed = False


def capped(delay: Callable[[BaseException, int], float], ceiling: float) -> Callable[[BaseException, int], float]:
    def wait(exc: BaseException, attempt: int) -> float:
        return min(float(delay(exc, attempt)), ceiling)

    wait.__wrapped__ = delay  # type: ignore[attr-defined]
    return wait


def install_retry_ceiling(ceiling: float = MAX_RETRY_WAIT_S) -> bool:
    """Wrap DSPy's retry delay once per process. False when this DSPy version has no such hook (nothing done)."""
    global _installed
    if _installed:
        return True
    try:
        from dspy.clients import execution
    except ImportError:
        return False
    delay = getattr(execution, "_delay", None)
    if not callable(delay):
        return False
    execution._delay = capped(delay, ceiling)
    _installed = True
    return True
