"""Anthropic's Message Batches API (https://docs.anthropic.com/en/api/creating-message-batches), as a
`backbones.batch_api.BatchClient`.

The requests go in one JSON body (``{"requests": [{"custom_id", "params"}]}``, no file), the key in ``x-api-key``.
Anthropic's states are mapped onto OpenAI's (`BatchState`):

- ``processing_status`` in_progress -> "in_progress", canceling -> "cancelling"; ended -> "cancelled" when a cancel
  was asked for, else "expired" when any request expired (its answered requests are still read), else "completed";
- ``request_counts``: total = every request, completed = succeeded, failed = errored (expired and canceled requests are
  neither: their lines come back `LineResult.expired`, to submit again);
- ``results_url`` is kept as the state's ``output_file_id``; results come in any order.

A line's result: succeeded -> status 200 and the message (what ``/v1/messages`` answers); errored -> the error's type
and message, with the HTTP status Anthropic gives that type; expired and canceled -> no status, `LineResult.expired`.
Batches take no metadata: what `submit` is given is not sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from clearmed.backbones.batch_api import (
    ANTHROPIC_LIMITS,
    BatchLine,
    BatchState,
    BatchStatus,
    HttpBatchClient,
    LineResult,
    RequestCounts,
    encoded_line,
    jsonl_items,
    one_target,
    server_reason,
    within_limits,
)
from clearmed.core.http import RETRIED_STATUS

__all__ = ["ANTHROPIC_API_BASE", "ANTHROPIC_VERSION", "AnthropicBatchClient"]

# With its version, as DSPy's native Anthropic engine takes its base_url: a backbone's api_base serves both.
ANTHROPIC_API_BASE: Final = "https://api.anthropic.com/v1"
ANTHROPIC_VERSION: Final = "2023-06-01"
# The HTTP status of each error type (https://docs.anthropic.com/en/api/errors); 529: overloaded.
_STATUS_OF_ERROR: Final = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


class AnthropicBatchClient(HttpBatchClient):
    """Anthropic's Message Batches API at ``api_base`` (see the module doc)."""

    provider = "anthropic"
    label = "Anthropic"
    retried = RETRIED_STATUS | {529}
    default_limits = ANTHROPIC_LIMITS

    @property
    def bearer_key(self) -> str | None:
        return None

    @property
    def headers(self) -> dict[str, str]:
        return {"x-api-key": self.api_key or "", "anthropic-version": ANTHROPIC_VERSION}

    def handles(self, url: str) -> bool:
        return url.rstrip("/") == f"{self.api_base}/messages"

    def submit(self, lines: Sequence[BatchLine], *, metadata: Mapping[str, str]) -> BatchState:
        target = one_target(lines)
        if not self.handles(target):
            raise ValueError(f"{target} is not the Messages endpoint of Anthropic's batch API at {self.api_base}")
        # The body as `split_lines` counted it: each request and its comma, the last comma the envelope's end.
        body = b'{"requests":[' + b"".join(encoded_line(line, "anthropic") for line in lines)[:-1] + b"]}"
        within_limits(len(lines), len(body), self.limits)
        reply = self._send(
            "POST",
            f"{self.api_base}/messages/batches",
            "the batch's creation",
            data=body,
            headers={"content-type": "application/json"},
        )
        return self._state(self._payload(reply, "the batch"))

    def status(self, batch_id: str) -> BatchState:
        reply = self._send("GET", f"{self.api_base}/messages/batches/{batch_id}", f"batch {batch_id}")
        return self._state(self._payload(reply, f"a look at batch {batch_id}"))

    def results(self, state: BatchState) -> list[LineResult]:
        if not state.terminal:
            raise ValueError(f"batch {state.id} is {state.status}: its results come when it has ended")
        if not state.output_file_id:
            return []
        reply = self._send("GET", state.output_file_id, f"the results of batch {state.id}")
        if reply.status >= 400:
            raise self._refused(reply, f"the results of batch {state.id}")
        return [self._line(item) for item in jsonl_items(reply.text)]

    def find(self, key: str, value: str) -> BatchState | None:
        """None: Message Batches keep no metadata, so a batch whose id a kill lost cannot be found by it."""
        return None

    def cancel(self, batch_id: str) -> BatchState:
        reply = self._send("POST", f"{self.api_base}/messages/batches/{batch_id}/cancel", f"the cancel of {batch_id}")
        return self._state(self._payload(reply, f"the cancel of batch {batch_id}"))

    def _state(self, batch: Mapping[str, Any]) -> BatchState:
        counts = {k: int((batch.get("request_counts") or {}).get(k) or 0) for k in _COUNTS}
        status: BatchStatus = {"in_progress": "in_progress", "canceling": "cancelling"}.get(
            str(batch.get("processing_status")), "completed"
        )  # type: ignore[assignment]
        if batch.get("processing_status") == "ended":
            status = (
                "cancelled" if batch.get("cancel_initiated_at") else "expired" if counts["expired"] else "completed"
            )
        return BatchState(
            id=str(batch["id"]),
            provider=self.provider,
            status=status,
            created_at=_epoch(batch.get("created_at")),
            request_counts=RequestCounts(
                total=sum(counts.values()), completed=counts["succeeded"], failed=counts["errored"]
            ),
            output_file_id=batch.get("results_url"),
        )

    def _line(self, item: Mapping[str, Any]) -> LineResult:
        custom_id = str(item.get("custom_id"))
        result = _object(item.get("result"))
        kind = str(result.get("type"))
        if kind == "succeeded" and isinstance(result.get("message"), dict):
            return LineResult(custom_id=custom_id, status_code=200, body=result["message"])
        if kind == "errored":
            outer = _object(result.get("error"))  # {"type": "error", "error": {"type", "message"}}
            error = _object(outer.get("error")) or outer
            code = str(error.get("type") or "error")
            return LineResult(
                custom_id=custom_id,
                status_code=_STATUS_OF_ERROR.get(code),
                error_code=code,
                error_message=server_reason(str(error.get("message") or ""), self.api_key) or None,
            )
        return LineResult(custom_id=custom_id, error_code=kind, error_message=f"the request was {kind}")


_COUNTS: Final = ("processing", "succeeded", "errored", "canceled", "expired")


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _epoch(value: object) -> float | None:
    """An RFC 3339 time ("2024-08-20T18:37:24.100435Z") as seconds since the epoch."""
    try:
        return datetime.fromisoformat(str(value)).timestamp() if value else None
    except ValueError:
        return None
