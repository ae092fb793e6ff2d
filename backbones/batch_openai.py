"""OpenAI's Files and Batch APIs (https://platform.openai.com/docs/guides/batch), as a `backbones.batch_api.BatchClient`.

The lines go up as one JSONL file (``POST /files``, purpose "batch": ``{"custom_id", "method": "POST", "url", "body"}``
each), a batch is created over it (``POST /batches``, window "24h", the run's metadata), its state is read
(``GET /batches/{id}``), and a finished batch's output and error files are read back (``GET /files/{id}/content``):
lines in any order, matched by ``custom_id``; a completed batch may have only an error file; an expired or cancelled
one keeps its answered part, its other lines "batch_expired" / "batch_cancelled" (`LineResult.expired`). A create that
got no reply is looked for among the batches over the same file before it is sent again, so a lost reply makes no
second batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clearmed.backbones.batch_api import (
    OPENAI_ENDPOINTS,
    OPENAI_LIMITS,
    BatchLine,
    BatchState,
    BatchUnavailable,
    HttpBatchClient,
    LineResult,
    RequestCounts,
    encoded_line,
    jsonl_items,
    one_target,
    server_reason,
    within_limits,
)
from clearmed.core.retries import backoff_delay, pause

__all__ = ["OpenAIBatchClient"]


class OpenAIBatchClient(HttpBatchClient):
    """OpenAI's Batch API (https://platform.openai.com/docs/guides/batch): the lines uploaded as a JSONL file (Files
    API, purpose "batch"), a batch created over it with a 24-hour window, its output and error files read back."""

    provider = "openai"
    label = "OpenAI"
    default_limits = OPENAI_LIMITS

    def handles(self, url: str) -> bool:
        return self._endpoint(url) is not None

    def _endpoint(self, url: str) -> str | None:
        """The batch endpoint ("/v1/chat/completions") that serves this synchronous URL, if any."""
        prefix = self.api_base + "/"
        if not url.startswith(prefix):
            return None
        endpoint = "/v1/" + url[len(prefix) :].strip("/")
        return endpoint if endpoint in OPENAI_ENDPOINTS else None

    def submit(self, lines: Sequence[BatchLine], *, metadata: Mapping[str, str]) -> BatchState:
        endpoint = self._endpoint(one_target(lines))
        if endpoint is None:
            raise ValueError(f"{lines[0].url} is not an endpoint of OpenAI's batch API at {self.api_base}")
        content = b"".join(encoded_line(line, "openai", endpoint=endpoint) for line in lines)
        within_limits(len(lines), len(content), self.limits)
        upload = self._send(
            "POST",
            f"{self.api_base}/files",
            "the batch file's upload",
            files={"file": ("clearmed-batch.jsonl", content, "application/jsonl")},
            data={"purpose": "batch"},
        )
        file_id = str(self._payload(upload, "the batch file").get("id") or "")
        if not file_id:
            raise BatchUnavailable(f"{self.service}: the upload's reply names no file id")
        body = {"input_file_id": file_id, "endpoint": endpoint, "completion_window": "24h", "metadata": dict(metadata)}
        return self._openai_state(self._create(body))

    def _create(self, body: dict[str, Any]) -> dict[str, Any]:
        """The new batch. A create that got no reply may have been made: the batch over the same file, if the
        provider lists one, is it; only otherwise is the create sent again (no batch is made twice)."""
        for attempt in range(self.num_retries + 1):
            try:
                reply = self._send(
                    "POST", f"{self.api_base}/batches", "the batch's creation", no_reply_retried=False, body=body
                )
            except BatchUnavailable as unheard:
                if not unheard.no_reply:  # a busy status after the retries: the batch was not made
                    raise
                made = self._batch_over(str(body["input_file_id"]))
                if made is not None:
                    return made
                if attempt == self.num_retries:
                    raise
                pause(backoff_delay(attempt))
                continue
            return self._payload(reply, "the batch")
        raise AssertionError("unreachable")

    def _batch_over(self, file_id: str) -> dict[str, Any] | None:
        """The batch made over this input file, among the newest 100 the provider lists."""
        listing = self._payload(self._send("GET", f"{self.api_base}/batches?limit=100", "the batch list"), "the list")
        found = [b for b in listing.get("data") or [] if isinstance(b, dict) and b.get("input_file_id") == file_id]
        return found[0] if found else None

    def find(self, key: str, value: str) -> BatchState | None:
        """The batch whose metadata holds ``key`` = ``value``, among the newest 100 the provider lists."""
        listing = self._payload(self._send("GET", f"{self.api_base}/batches?limit=100", "the batch list"), "the list")
        for batch in listing.get("data") or []:
            if isinstance(batch, dict) and (batch.get("metadata") or {}).get(key) == value:
                return self._openai_state(batch)
        return None

    def status(self, batch_id: str) -> BatchState:
        """The batch's state; one that failed validation is "failed", each reason a line of its ``errors``."""
        reply = self._send("GET", f"{self.api_base}/batches/{batch_id}", f"batch {batch_id}")
        return self._openai_state(self._payload(reply, f"a look at batch {batch_id}"))

    def results(self, state: BatchState) -> list[LineResult]:
        """The lines of a finished batch, from its output file and its error file (either may be missing: a batch of
        only failures has no output file); none for a failed batch. Lines come in any order."""
        if not state.terminal:
            raise ValueError(f"batch {state.id} is {state.status}: its results come when it has ended")
        if state.status == "failed":  # refused in validation: no line ran
            return []
        results: list[LineResult] = []
        for file_id in (state.output_file_id, state.error_file_id):
            if file_id:
                reply = self._send("GET", f"{self.api_base}/files/{file_id}/content", f"file {file_id}")
                if reply.status >= 400:
                    raise self._refused(reply, f"the content of file {file_id}")
                results.extend(self._openai_line(item) for item in jsonl_items(reply.text))
        return results

    def cancel(self, batch_id: str) -> BatchState:
        """Cancelling (then cancelled: the lines already answered are kept); a batch that has ended stays as it is."""
        reply = self._send("POST", f"{self.api_base}/batches/{batch_id}/cancel", f"the cancel of batch {batch_id}")
        if reply.status == 404:
            raise self._refused(reply, f"the cancel of batch {batch_id}")
        if reply.status >= 400:  # OpenAI refuses to cancel a batch that has ended
            return self.status(batch_id)
        return self._openai_state(self._payload(reply, f"the cancel of batch {batch_id}"))

    def _openai_state(self, batch: Mapping[str, Any]) -> BatchState:
        counts = batch.get("request_counts") or {}
        errors = (batch.get("errors") or {}).get("data") or []
        return BatchState(
            id=str(batch["id"]),
            provider=self.provider,
            status=batch["status"],
            created_at=batch.get("created_at"),
            request_counts=RequestCounts(**{k: int(counts.get(k) or 0) for k in ("total", "completed", "failed")}),
            output_file_id=batch.get("output_file_id"),
            error_file_id=batch.get("error_file_id"),
            errors=[_validation_error(e, self.api_key) for e in errors if isinstance(e, dict)],
        )

    def _openai_line(self, item: Mapping[str, Any]) -> LineResult:
        custom_id = str(item.get("custom_id"))
        response, error = item.get("response"), item.get("error")
        if isinstance(response, dict):
            status, body = response.get("status_code"), response.get("body")
            body = body if isinstance(body, dict) else None
            failure = body.get("error") if body is not None and status != 200 else None
            failure = failure if isinstance(failure, dict) else {}
            code = failure.get("code") or failure.get("type")
            message = failure.get("message")
            return LineResult(
                custom_id=custom_id,
                status_code=status if isinstance(status, int) else None,
                body=body,
                error_code=str(code) if code else None,
                error_message=server_reason(str(message), self.api_key) if message else None,
            )
        error = error if isinstance(error, dict) else {}
        return LineResult(
            custom_id=custom_id,
            error_code=str(error.get("code") or "no_response"),
            error_message=server_reason(str(error.get("message") or "the line holds no response"), self.api_key),
        )


def _validation_error(error: Mapping[str, Any], secret: str | None) -> str:
    where = f"line {error['line']}: " if error.get("line") is not None else ""
    return server_reason(f"{where}{error.get('code') or 'invalid'}: {error.get('message') or ''}", secret)
