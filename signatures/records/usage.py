"""Failures recorded instead of raised, and the cost of every call."""

from __future__ import annotations

from typing import Literal

from pydantic import field_validator

from clearmed.signatures.records.base import Record
from clearmed.signatures.sanitize import redact_secrets

ErrorKind = Literal[
    "lm_error",
    "parse_error",
    "invalid_answer",
    "retrieval_error",
    "search_error",
    "timeout",
    "internal_error",
]


class StepError(Record):
    """A failure recorded in the trail instead of raised: which stage, what kind, and the message."""

    stage: str
    kind: ErrorKind
    message: str
    raw_output: str | None = None

    # Provider errors sometimes quote the credentials they were sent; recorded errors end up in run folders.
    @field_validator("message", "raw_output")
    @classmethod
    def _redact(cls, value: str | None) -> str | None:
        return redact_secrets(value) if value is not None else None


class CallUsage(Record):
    """One LM or search call: what it cost. Cache hits cost no tokens but are still listed."""

    stage: str
    role: str = "main"
    model: str = ""
    calls: int = 1
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cached: bool = False
    failed: bool = False
