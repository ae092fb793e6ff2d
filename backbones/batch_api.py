"""The providers' batch APIs, on the wire: send LM requests as one batch at half price, poll it, read its lines back.

A `BatchLine` is one request exactly as the synchronous call would post it (its full URL and JSON body); a
`BatchClient` submits a list of them as one batch (one endpoint, one model: `split_lines` cuts a run's requests at the
provider's limits), reports its `BatchState`, and reads a finished batch's lines as `LineResult`s, each with the body
the synchronous endpoint would have answered, so the caller can store it under the synchronous call's cache key.

- `OpenAIBatchClient` (`backbones.batch_openai`): OpenAI's Files and Batch APIs (a JSONL file uploaded with purpose "batch", then a batch over it);
- `AnthropicBatchClient` (`backbones.batch_anthropic`): Anthropic's Message Batches API;
- `batch_client_for` gives a backbone's client (hosted ``openai/...`` and ``anthropic/...`` only), and
  `no_batch_reason` the one line that refuses any other backbone.

Failures: a key the provider refuses or an exhausted balance is the run-stopping `FatalServiceError` (the reading of
`clearmed.core.http.fatal_cause`; the key never appears in its text); a file or batch the provider refuses (a
4xx at upload or create) is `BatchRejected` (a batch that fails validation later is a "failed" `BatchState`, its
reasons in ``errors``, for the caller to record and raise); a service that gave no usable reply
after clearmed's retries (`clearmed.core.http`: rate limits and 5xx retried with backoff) is `BatchUnavailable`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from clearmed.core.errors import FatalServiceError
from clearmed.core.http import RETRIED_STATUS, NoReply, Reply, after_retries, fatal_cause, request

if TYPE_CHECKING:
    from clearmed.backbones.config import BackboneConfig

__all__ = [
    "ANTHROPIC_LIMITS",
    "OPENAI_API_BASE",
    "OPENAI_ENDPOINTS",
    "OPENAI_LIMITS",
    "TERMINAL_STATUSES",
    "BatchClient",
    "BatchLimits",
    "BatchLine",
    "BatchRejected",
    "BatchState",
    "BatchStatus",
    "BatchUnavailable",
    "HttpBatchClient",
    "LineResult",
    "RequestCounts",
    "batch_client_for",
    "encoded_line",
    "jsonl_items",
    "no_batch_reason",
    "one_target",
    "server_reason",
    "split_lines",
    "within_limits",
]

BatchStatus = Literal[
    "validating", "in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled"
]
TERMINAL_STATUSES: Final = frozenset({"completed", "failed", "expired", "cancelled"})
OPENAI_API_BASE: Final = "https://api.openai.com/v1"
# The endpoints a batch may name (https://platform.openai.com/docs/api-reference/batch/create, "endpoint").
OPENAI_ENDPOINTS: Final = ("/v1/responses", "/v1/chat/completions", "/v1/embeddings", "/v1/completions")
# A line's error code (OpenAI) or result type (Anthropic) for a request never run: the batch expired or was cancelled.
_NOT_RUN: Final = frozenset({"batch_expired", "batch_cancelled", "expired", "canceled"})


class BatchLine(BaseModel):
    """One request as the synchronous call would send it: the full URL it posts to and its JSON body, exactly."""

    model_config = ConfigDict(frozen=True)

    # Anthropic's rule for a custom_id (1 to 64 letters, digits, "_" or "-"), which OpenAI's ids meet too.
    custom_id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    url: str  # e.g. "https://api.openai.com/v1/chat/completions"
    body: dict[str, Any]


class BatchLimits(BaseModel):
    """What one batch may hold, and the form its lines take on the wire (which `encoded_line` writes)."""

    model_config = ConfigDict(frozen=True)

    max_requests: int = Field(ge=1)
    max_bytes: int = Field(ge=1)
    line_form: Literal["openai", "anthropic"] = "openai"


# "The file can contain up to 50,000 requests, and can be up to 200 MB in size."
# (https://platform.openai.com/docs/api-reference/batch/create, input_file_id)
OPENAI_LIMITS: Final = BatchLimits(max_requests=50_000, max_bytes=200 * 1024 * 1024)
# "A Message Batch is limited to either 100,000 Message requests or 256 MB in size, whichever is reached first."
# (https://docs.anthropic.com/en/docs/build-with-claude/batch-processing, "Batch limitations")
ANTHROPIC_LIMITS: Final = BatchLimits(max_requests=100_000, max_bytes=256 * 1024 * 1024, line_form="anthropic")
# Anthropic's batch is one JSON body: {"requests":[line,line,...]}; its envelope's bytes beyond one separator a line.
_ANTHROPIC_ENVELOPE: Final = len('{"requests":[') + len("]}") - 1


class RequestCounts(BaseModel):
    total: int = 0
    completed: int = 0
    failed: int = 0


class BatchState(BaseModel):
    """A batch as its provider last reported it, in OpenAI's terms (Anthropic's are mapped onto them)."""

    id: str
    provider: str
    status: BatchStatus
    created_at: float | None = None  # seconds since the epoch
    request_counts: RequestCounts = Field(default_factory=RequestCounts)
    output_file_id: str | None = None  # Anthropic: the results_url
    error_file_id: str | None = None
    errors: list[str] = Field(default_factory=list)  # why a batch failed validation, one line each

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class LineResult(BaseModel):
    """One line of a finished batch: its HTTP status and the body the synchronous endpoint would have answered, or why
    it has none."""

    custom_id: str
    status_code: int | None = None  # None: the line has no response (an error-file line, an expired one)
    body: dict[str, Any] | None = None  # OpenAI: response.body; Anthropic: result.message
    error_code: str | None = None
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.status_code == 200 and self.body is not None

    @property
    def expired(self) -> bool:
        """Not run, because the batch expired or was cancelled first: to submit again, not a failure."""
        return self.error_code in _NOT_RUN


class BatchRejected(Exception):
    """The provider refused the file or the batch: a 4xx at upload or create (raised by the clients), or a batch that
    failed validation (raised by their caller, from the "failed" state). The message is one line with the provider's
    reason; ``state`` is the failed batch's, when there is one."""

    def __init__(self, message: str, *, state: BatchState | None = None) -> None:
        super().__init__(message)
        self.state = state


class BatchUnavailable(Exception):
    """The batch service gave no usable reply (none at all, or a rate limit or server error) after the retries: nothing
    about the batch was decided, so the same step can be tried again later. ``no_reply``: no reply came at all (so a
    request may have been carried out unheard)."""

    def __init__(self, message: str, *, no_reply: bool = False) -> None:
        super().__init__(message)
        self.no_reply = no_reply


class BatchClient(Protocol):
    provider: str
    limits: BatchLimits

    def handles(self, url: str) -> bool: ...
    def submit(self, lines: Sequence[BatchLine], *, metadata: Mapping[str, str]) -> BatchState: ...
    def status(self, batch_id: str) -> BatchState: ...
    def results(self, state: BatchState) -> list[LineResult]: ...
    def cancel(self, batch_id: str) -> BatchState: ...
    def find(self, key: str, value: str) -> BatchState | None:
        """The batch whose metadata holds ``key`` = ``value``, among the newest the provider lists; None if none is
        (or the provider keeps no metadata)."""
        ...


def _json_bytes(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def encoded_line(line: BatchLine, line_form: Literal["openai", "anthropic"], *, endpoint: str | None = None) -> bytes:
    """The line as its provider's batch holds it, with its separator: an OpenAI JSONL line (``url`` is ``endpoint``,
    by default the URL's path) and its newline, or an Anthropic request and its comma."""
    if line_form == "anthropic":
        return _json_bytes({"custom_id": line.custom_id, "params": line.body}) + b","
    path = endpoint or urlsplit(line.url).path
    return _json_bytes({"custom_id": line.custom_id, "method": "POST", "url": path, "body": line.body}) + b"\n"


def split_lines(lines: Sequence[BatchLine], limits: BatchLimits) -> list[list[BatchLine]]:
    """The lines as batches: grouped by endpoint URL and model (one of each a batch), each group cut at
    ``limits.max_requests`` lines and ``limits.max_bytes`` bytes as encoded (`encoded_line`); order kept in a group. A
    line alone over the byte limit, or a custom_id twice in a group, is a ValueError."""
    groups: dict[tuple[str, str], list[BatchLine]] = {}
    for line in lines:
        groups.setdefault((line.url, str(line.body.get("model", ""))), []).append(line)
    overhead = _ANTHROPIC_ENVELOPE if limits.line_form == "anthropic" else 0
    batches: list[list[BatchLine]] = []
    for group in groups.values():
        seen: set[str] = set()
        current: list[BatchLine] = []
        size = overhead
        for line in group:
            if line.custom_id in seen:
                raise ValueError(f"custom_id {line.custom_id} is given twice for one endpoint and model")
            seen.add(line.custom_id)
            length = len(encoded_line(line, limits.line_form))
            if overhead + length > limits.max_bytes:
                raise ValueError(
                    f"batch line {line.custom_id} is {overhead + length:,} bytes, over the batch limit of "
                    f"{limits.max_bytes:,}: send it without --batch"
                )
            if current and (len(current) >= limits.max_requests or size + length > limits.max_bytes):
                batches.append(current)
                current, size = [], overhead
            current.append(line)
            size += length
        if current:
            batches.append(current)
    return batches


def server_reason(text: str, secret: str | None) -> str:
    """Server text as one line, the key that was sent replaced."""
    if secret and len(secret) >= 4:
        text = text.replace(secret, "***")
    return re.sub(r"\s+", " ", text).strip()


class HttpBatchClient:
    """What both clients share: requests by clearmed's policy, and each failure as this module's errors."""

    provider = ""
    label = ""
    retried: frozenset[int] = RETRIED_STATUS  # the statuses retried with backoff
    default_limits: BatchLimits  # the provider's documented limits

    def __init__(
        self,
        api_base: str,
        api_key: str | None,
        *,
        timeout: float = 60.0,
        num_retries: int = 3,
        service: str | None = None,
        limits: BatchLimits | None = None,
    ) -> None:
        self.api_base = api_base.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.num_retries = num_retries
        self.service = service or f"{self.label} batch API"
        self.limits = limits or self.default_limits

    def _send(
        self,
        method: str,
        url: str,
        what: str,
        *,
        no_reply_retried: bool = True,
        headers: Mapping[str, str] | None = None,
        **sent: Any,
    ) -> Reply:
        """One request by the retry policy; a fatal refusal raised, a busy status after the retries a
        `BatchUnavailable`, any other reply returned."""
        try:
            reply = request(
                method,
                url,
                timeout=self.timeout,
                retries=self.num_retries,
                retried=self.retried,
                service=self.service,
                retry_no_reply=no_reply_retried,
                final=self._fatal,  # no retry mends a refused key or balance
                api_key=self.bearer_key,
                headers={**self.headers, **(headers or {})},
                **sent,
            )
        except NoReply as failed:
            why = f"{self.service}: no reply to {what}: {failed.why}{after_retries(failed.retries)}"
            raise BatchUnavailable(why, no_reply=True) from None
        cause = fatal_cause(reply)
        if cause is not None and self._fatal(reply):
            raise FatalServiceError(
                self.service, cause, server_reason(reply.error_text(), self.api_key), status=reply.status
            )
        if reply.status in self.retried:
            raise BatchUnavailable(
                f"{self.service}: {what} answered HTTP {reply.status}{after_retries(reply.retries)}: "
                f"{server_reason(reply.error_text(), self.api_key)}"
            )
        return reply

    @property
    def bearer_key(self) -> str | None:
        """The key sent as ``Authorization: Bearer``; None for a provider that takes it in its own header."""
        return self.api_key

    @property
    def headers(self) -> dict[str, str]:
        """Headers every request sends."""
        return {}

    @staticmethod
    def _fatal(reply: Reply) -> bool:
        # A 404 of the batch API is a batch or file it does not have, not a missing model: refused, not fatal.
        return fatal_cause(reply) in ("auth", "billing")

    def _refused(self, reply: Reply, what: str) -> BatchRejected:
        return BatchRejected(
            f"{self.label} refused {what} (HTTP {reply.status}): {server_reason(reply.error_text(), self.api_key)}"
        )

    def _payload(self, reply: Reply, what: str) -> dict[str, Any]:
        if reply.status >= 400:
            raise self._refused(reply, what)
        if not isinstance(reply.payload, dict):
            raise BatchUnavailable(f"{self.service}: {what} answered HTTP {reply.status} without a JSON object")
        return reply.payload


def one_target(lines: Sequence[BatchLine]) -> str:
    """The one URL the lines post to, with one model (`split_lines` makes such lists)."""
    if not lines:
        raise ValueError("a batch needs at least one line")
    targets = {(line.url, str(line.body.get("model", ""))) for line in lines}
    if len(targets) > 1:
        raise ValueError(f"one batch takes one endpoint and one model, not {len(targets)}: split_lines first")
    return lines[0].url


def within_limits(count: int, size: int, limits: BatchLimits) -> None:
    if count > limits.max_requests or size > limits.max_bytes:
        raise ValueError(
            f"{count:,} lines of {size:,} bytes exceed the batch limits ({limits.max_requests:,} lines, "
            f"{limits.max_bytes:,} bytes): split_lines first"
        )


def jsonl_items(text: str) -> list[dict[str, Any]]:
    """A results file's lines; a line that is not a JSON object is left out (its request then has no result)."""
    items = []
    for raw in text.splitlines():
        try:
            item = json.loads(raw) if raw.strip() else None
        except ValueError:
            continue
        if isinstance(item, dict):
            items.append(item)
    return items


def batch_client_for(
    backbone: BackboneConfig, *, api_key: str | None, timeout: float | None = 60.0, num_retries: int = 3
) -> BatchClient | None:
    """The batch client of a hosted ``openai/...`` or ``anthropic/...`` backbone (at its api_base, if it has one);
    None for any other backbone. ``timeout`` bounds each wait for the service's next byte (None: 60 s)."""
    timeout = timeout or 60.0
    provider = _hosted_provider(backbone)
    api_base = getattr(backbone, "api_base", None)
    service = f"batch API of {backbone.dspy_model}"
    if provider == "openai":
        from clearmed.backbones.batch_openai import OpenAIBatchClient

        return OpenAIBatchClient(
            api_base or OPENAI_API_BASE, api_key, timeout=timeout, num_retries=num_retries, service=service
        )
    if provider == "anthropic":
        from clearmed.backbones.batch_anthropic import ANTHROPIC_API_BASE, AnthropicBatchClient

        return AnthropicBatchClient(
            api_base or ANTHROPIC_API_BASE, api_key, timeout=timeout, num_retries=num_retries, service=service
        )
    return None


def _hosted_provider(backbone: BackboneConfig) -> str | None:
    return backbone.model.partition("/")[0] if backbone.kind == "hosted" else None


def no_batch_reason(role: str, backbone: BackboneConfig) -> str | None:
    """None when the backbone has a batch API (`batch_client_for`); else the one line that refuses ``--batch``."""
    provider = _hosted_provider(backbone)
    if provider in ("openai", "anthropic"):
        return None
    if backbone.kind == "embedded":
        what = f"embedded model {backbone.model}, run in this process"
    elif backbone.kind == "openai_compatible":
        what = f"openai_compatible server {getattr(backbone, 'api_base', None)}"
    else:
        what = f"hosted {backbone.model}: clearmed batches only openai/ and anthropic/ models"
    return f"backbone {role} ({what}) has no batch API: run without --batch and raise [run] num_threads for concurrency instead"
