"""Degraded questions: a pathway or adjudication stage that still failed after its retries.

A question whose trail holds a transient failure (`StepError.transient`: a rate limit, timeout, server or connection
error, or a prompt over the context window) was answered with a stage missing: CLEAR with two sources is not CLEAR.
Such a question is recorded as degraded with the stages that failed (`EvalRecord.degraded_stages`), reported apart from
clean answers, and redone on resume; its good calls come back from the caches, so a redo pays only for what failed.
An unparseable output or a search that found nothing is no such failure: a retry would meet it again.
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel

from clearmed.core.endpoints import endpoints_named
from clearmed.signatures.records import Decision, StepError

__all__ = ["degraded_endpoints", "degraded_stages", "step_errors", "transient_failures"]


def _errors(value: object) -> Iterator[StepError]:
    """Every `StepError` anywhere in a record: candidates, steps, verifier outputs, follow-up rounds, search plans."""
    if isinstance(value, StepError):
        yield value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _errors(getattr(value, name))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _errors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _errors(item)


def step_errors(decision: Decision) -> list[StepError]:
    """Every failure recorded in the decision's trail, each once (a pathway's error is also quoted by its step)."""
    seen: dict[tuple[str, str, str], StepError] = {}
    for error in _errors(decision):
        seen.setdefault((error.stage, error.kind, error.message), error)
    return list(seen.values())


def transient_failures(decision: Decision) -> list[StepError]:
    """The decision's transient failures, each once."""
    return [error for error in step_errors(decision) if error.transient]


def degraded_stages(decision: Decision) -> list[str]:
    """The stages that failed after their retries, in trail order; empty for a clean question."""
    return list(dict.fromkeys(error.stage for error in transient_failures(decision)))


def degraded_endpoints(decision: Decision) -> list[str]:
    """The endpoints (``scheme://host:port``) the decision's transient failures name, in trail order: where the
    stages that failed were asked (an LM failure names its endpoint: `clearmed.backbones.client`)."""
    return list(
        dict.fromkeys(where for error in transient_failures(decision) for where in endpoints_named(error.message))
    )
