"""Which LM errors stop a run: a refused key, an exhausted balance, a missing model, told from the errors a run
survives, and said in one line (`fatal_lm_error`, the fatal side of `backbones.failures`' classification).

The line quotes the provider's own sentence, without the LiteLLM engine's prefix, cut to `_MAX_DETAIL` characters,
and with the key that was sent replaced. `backbones.client.ClearmedLM` raises it, never retried.
"""

from __future__ import annotations

import re

from dspy.utils.exceptions import (
    LMAuthError,
    LMBillingError,
    LMInvalidRequestError,
    LMNotConfiguredError,
    LMUnsupportedModelError,
)

from clearmed.core.errors import FatalCause, FatalServiceError

__all__ = ["fatal_lm_error"]

# Server text quoted in a fatal error's one line is cut here.
_MAX_DETAIL = 160
_LITELLM_PREFIX = re.compile(r"^litellm\.\w+: (?:\w+: )?(?:\w+Exception - )?")


def fatal_lm_error(exc: BaseException, service: str, *, secret: object = None) -> FatalServiceError | None:
    """The `FatalServiceError` an LM error means, or None for an error a run survives (rate limits, timeouts,
    server errors, a refused prompt). ``secret`` (the key that was sent) is replaced in the quoted server text."""
    cause: FatalCause
    if isinstance(exc, LMAuthError | LMNotConfiguredError):
        cause = "auth"
    elif isinstance(exc, LMBillingError):
        cause = "billing"
    elif isinstance(exc, LMUnsupportedModelError) or (
        # vLLM's older error body ({"message": ..., "code": 404}) is not read as a missing model by the native
        # engine; a 404 from a chat endpoint means the model or the endpoint is not there, for every call.
        isinstance(exc, LMInvalidRequestError) and getattr(exc, "status", None) == 404
    ):
        cause = "model_not_found"
    else:
        return None
    # The provider's own sentence: the first line (the native engine appends remedies below it), without the
    # "litellm.AuthenticationError: AuthenticationError: OpenAIException - " prefix of the LiteLLM engine.
    lines = str(getattr(exc, "message", "") or "").strip().splitlines()
    detail = _LITELLM_PREFIX.sub("", lines[0].strip()) if lines else ""
    if isinstance(secret, str) and len(secret) >= 4:
        detail = detail.replace(secret, "***")
    if len(detail) > _MAX_DETAIL:
        detail = detail[: _MAX_DETAIL - 3] + "..."
    status = getattr(exc, "status", None)
    return FatalServiceError(service, cause, detail, status=status if isinstance(status, int) else None)
