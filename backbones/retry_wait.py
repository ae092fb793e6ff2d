"""How long an LM call waits before it is retried: the wait the server asked for, read from a DSPy LM error.

`ClearmedLM` retries by clearmed's failure policy (`backbones.failures`, `backbones.client`) through tenacity, waiting
`clearmed.core.retries.backoff_delay` with `server_hint_s` as the server's hint (``Retry-After`` or the
``x-ratelimit-reset-*`` headers, kept on the error by DSPy's native engine or on its cause by the LiteLLM engine), never
above `MAX_RETRY_WAIT_S`, each retry counted under `LM_SERVICE`.

DSPy never retries an LM built by `backbones.factory.build_lm` itself: `ClearmedLM` hands DSPy ``num_retries = 0``, so
DSPy's own wait (`dspy.clients.execution._delay`: ``Retry-After`` however long, else 1, 2, 4 ... s without jitter) is
never reached and is left as DSPy ships it (it was once replaced here, when DSPy did the retrying).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final

from clearmed.core.retries import MAX_RETRY_WAIT_S, retry_hint_s

__all__ = ["LM_SERVICE", "MAX_RETRY_WAIT_S", "server_hint_s"]

# The service name LM retries are counted under in `RetryTally.by_service`.
LM_SERVICE: Final = "lm"


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


def _last(value: object) -> str:
    if isinstance(value, list | tuple):
        return str(value[-1]) if value else ""
    return str(value)
