"""Errors the command line reports as one clear line (exit code 2) instead of a traceback."""

from __future__ import annotations

import re
from typing import Final, Literal

from clearmed.core.sanitize import redact_secrets

__all__ = ["FATAL_CAUSES", "CallDeferred", "FatalCause", "FatalServiceError", "UsageError"]


class UsageError(Exception):
    """Bad input from the user: a malformed question, an unknown demo id, conflicting flags."""


# Refusals no retry mends: every later call would fail the same way, so a run stops instead of degrading.
FatalCause = Literal["auth", "billing", "model_not_found", "local_data", "unreachable"]
FATAL_CAUSES: Final[dict[FatalCause, str]] = {
    "auth": "authentication failed",
    "billing": "billing or quota exhausted",
    "model_not_found": "model not found",
    # a search cache or index that is corrupt or cannot be written: every later search would fail the same way
    "local_data": "unusable",
    # refused or not resolved before the endpoint ever answered: a wrong address, or a server not started
    # (`clearmed.core.endpoints`); every question would fail the same way
    "unreachable": "unreachable",
}


class FatalServiceError(Exception):
    """An outside service (an LM endpoint, Tavily) refused for good: bad key, exhausted balance, missing model, or an
    endpoint that refused the connection (or whose host was not found) before it ever answered.

    Raised by the service clients (`clearmed.backbones`, `clearmed.retrieval.tavily`), never recorded per question:
    the run stops after its in-flight questions. The message is one line naming the service and the cause, e.g.
    ``Tavily: billing or quota exhausted (HTTP 432): plan usage limit reached; raise the plan or wait for the reset``.
    ``detail`` is short server text; credentials in it (values of the environment's key variables, anything shaped
    like a key) are redacted here, and raisers replace the key they sent as well.
    """

    def __init__(self, service: str, cause: FatalCause, detail: str = "", *, status: int | None = None) -> None:
        self.service = service
        self.cause: FatalCause = cause
        self.status = status
        self.detail = redact_secrets(re.sub(r"\s+", " ", detail).strip())
        what = FATAL_CAUSES[cause] + (f" (HTTP {status})" if status is not None else "")
        super().__init__(f"{service}: {what}" + (f": {self.detail}" if self.detail else ""))


class CallDeferred(BaseException):
    """An LM call of a batch run (`eval --batch`) missed the cache and was queued for the provider's batch API instead of
    being sent: the question it was made for stops here, unrecorded, and runs again in the run's next pass, once the
    batch has answered (`clearmed.backbones.batch_calls`).

    A BaseException, as KeyboardInterrupt is: every stage and pathway records what an ``except Exception`` catches as
    a failed step, and a deferred call is not a failure. Only the run harness catches it."""

    def __init__(self, url: str) -> None:
        super().__init__(f"call to {url} queued for a provider batch")
