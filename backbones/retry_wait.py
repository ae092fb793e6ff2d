"""How long an LM call waits before it is retried, and every retry counted.

`ClearmedLM` retries by clearmed's failure policy (`backbones.failures`, `backbones.client`) and waits `lm_retry_delay`.
A plain `dspy.LM` is retried by DSPy 3.4 itself: rate limits, timeouts, server and transport errors `num_retries` times,
sleeping `dspy.clients.execution._delay(exc, attempt)` in between, which is the provider's ``Retry-After`` however long
(one response asking for an hour stalls a run for an hour) or else 1, 2, 4 ... s with no jitter. `lm_retry_delay`
replaces that wait with clearmed's policy (`clearmed.core.retries.backoff_delay`): the server's hint from ``Retry-After`` or
the ``x-ratelimit-reset-*`` headers, else exponential backoff with jitter, never above `MAX_RETRY_WAIT_S`; and it notes
each retry in the caller's `count_retries()` scopes. Which errors are retried stays DSPy's decision
(`dspy.utils.exceptions.is_retryable_lm_error`): authentication, billing and missing-model errors never are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from clearmed.core.retries import MAX_RETRY_WAIT_S, backoff_delay, note_retry, retry_hint_s

__all__ = ["MAX_RETRY_WAIT_S", "install_retry_policy", "lm_retry_delay", "server_hint_s"]

# The service name LM retries are counted under in `RetryTally.by_service`.
LM_SERVICE = "lm"

_installed = False


def server_hint_s(exc: BaseException) -> float | None:
    """The wait the server asked for, read from a DSPy LM error (or the SDK error it was raised from)."""
    hint = getattr(exc, "retry_after", None)
    if isinstance(hint, int | float) and not isinstance(hint, bool) and math.isfinite(hint) and hint >= 0:
        return float(hint)
    # The native engine keeps the rate-limit headers on the error; the LiteLLM engine leaves them on its cause.
    captured = getattr(exc, "rate_limit_headers", None)
    if isinstance(captured, Mapping) and captured:
        return retry_hint_s({name: _last(value) for name, value in captured.items()})
    cause = exc.__cause__
    for _ in range(3):
        if cause is None:
            break
        headers = getattr(getattr(cause, "response", None), "headers", None) or getattr(cause, "headers", None)
        if isinstance(headers, Mapping) and headers:
            return retry_hint_s(headers)
        cause = cause.__cause__
    return None


def lm_retry_delay(exc: BaseException, attempt: int) -> float:
    """DSPy's retry wait, clearmed's way: the server's hint or jittered backoff, capped, and counted."""
    wait = backoff_delay(attempt, server_hint_s(exc))
    note_retry(LM_SERVICE, wait)
    return wait


def install_retry_policy() -> bool:
    """Make DSPy wait `lm_retry_delay` between LM retries (once per process); False when this DSPy version has no
    such hook (nothing done, DSPy's own waits stay)."""
    global _installed
    if _installed:
        return True
    try:
        from dspy.clients import execution
    except ImportError:
        return False
    original = getattr(execution, "_delay", None)
    if not callable(original):
        return False
    execution._delay = lm_retry_delay
    _installed = True
    return True


def _last(value: object) -> str:
    if isinstance(value, list | tuple):
        return str(value[-1]) if value else ""
    return str(value)
