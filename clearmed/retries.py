"""Retries of calls to outside services: one backoff policy, and a per-call count that callers can read.

LM calls retry inside DSPy (`clearmed.backbones.retry_wait` installs `backoff_delay` as DSPy's wait); Tavily
searches retry through tenacity (`clearmed.retrieval.tavily`). Both report each retry with `note_retry`, which adds
it to every `count_retries()` scope open in the calling context, so a caller learns how many retries one call took
without a counter threaded through DSPy:

    with count_retries() as retries:
        prediction = predictor(**inputs)
    row.retries = retries.total

Scopes are context-local (`contextvars`): concurrent threads and asyncio tasks count apart, and a scope opened in a
parent is shared with worker threads started under a copy of its context (the tally is locked for that).

A metered service also reports what a call billed with `note_credits` (Tavily: credits by search depth), so the same
scope tells a caller what the call cost, and a cache hit, which never reaches the service, costs nothing.
"""

from __future__ import annotations

import math
import random
import re
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from email.utils import parsedate_to_datetime
from typing import Final

__all__ = [
    "JITTER_S",
    "MAX_RETRY_WAIT_S",
    "RetryTally",
    "backoff_delay",
    "count_retries",
    "note_credits",
    "note_retry",
    "retry_hint_s",
]

# No single wait is longer: a provider asking for an hour fails the call after its retries instead of stalling a run
# in silence (the failure is then recorded, or stops the run when it is fatal).
MAX_RETRY_WAIT_S: Final = 60.0
# Random extra wait, so threads throttled by the same burst do not come back in the same instant.
JITTER_S: Final = 1.0


class RetryTally:
    """Retries counted in one `count_retries()` scope: per service ("lm", "tavily") and the seconds waited; and the
    credits metered services billed in it (`credits_by_service`)."""

    def __init__(self, parent: RetryTally | None = None) -> None:
        self.parent = parent
        self.by_service: dict[str, int] = {}
        self.credits_by_service: dict[str, float] = {}
        self.waited_s = 0.0
        self._lock = threading.Lock()

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.by_service.values())

    @property
    def credits(self) -> float:
        with self._lock:
            return sum(self.credits_by_service.values())

    def _add(self, service: str, wait_s: float) -> None:
        with self._lock:
            self.by_service[service] = self.by_service.get(service, 0) + 1
            self.waited_s += wait_s

    def _bill(self, service: str, credits: float) -> None:
        with self._lock:
            self.credits_by_service[service] = self.credits_by_service.get(service, 0.0) + credits

    def __repr__(self) -> str:
        return f"RetryTally({self.by_service!r}, waited_s={self.waited_s:.2f})"


_SCOPE: ContextVar[RetryTally | None] = ContextVar("clearmed_retry_scope", default=None)


@contextmanager
def count_retries() -> Iterator[RetryTally]:
    """Count the retries of every service call made inside the block; scopes nest (an outer one counts all)."""
    tally = RetryTally(parent=_SCOPE.get())
    token = _SCOPE.set(tally)
    try:
        yield tally
    finally:
        _SCOPE.reset(token)


def note_retry(service: str, wait_s: float) -> None:
    """Called by a client right before it waits `wait_s` seconds to retry: counted in every open scope."""
    tally = _SCOPE.get()
    while tally is not None:
        tally._add(service, wait_s)
        tally = tally.parent


def note_credits(service: str, credits: float) -> None:
    """Called by a metered client after a billed call: its credits are counted in every open scope."""
    tally = _SCOPE.get()
    while tally is not None:
        tally._bill(service, credits)
        tally = tally.parent


def backoff_delay(
    attempt: int, hint_s: float | None = None, *, ceiling: float = MAX_RETRY_WAIT_S, rng: random.Random | None = None
) -> float:
    """Seconds to wait before retry number ``attempt + 1`` (``attempt`` counts from 0).

    The server's hint (`retry_hint_s`) wins when it gave one, plus jitter of up to the hint itself (at least 0.1 s,
    at most `JITTER_S`); otherwise exponential backoff with "equal jitter": a random wait between half and all of
    ``2**attempt`` s. Never above ``ceiling``.
    """
    draw = (rng or random).random()
    if hint_s is not None and math.isfinite(hint_s) and hint_s >= 0:
        wait = hint_s + draw * min(JITTER_S, max(hint_s, 0.1))
    else:
        wait = min(2.0 ** min(attempt, 16), ceiling) * (0.5 + 0.5 * draw)
    return min(wait, ceiling)


# OpenAI-style reset durations: "1s", "6m0s", "20ms", "2m59.56s", "1h".
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
# A bare number this large is an epoch timestamp (some APIs send the reset time, not the wait).
_EPOCH_FROM: Final = 1e9


def _seconds(value: str) -> float | None:
    text = value.strip().lower()
    if not text:
        return None
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(number) or number < 0:
            return None
        return max(0.0, number - time.time()) if number >= _EPOCH_FROM else number
    parts = _DURATION_PART.findall(text)
    if parts and "".join(amount + unit for amount, unit in parts) == text.replace(" ", ""):
        return sum(float(amount) * _UNIT_S[unit] for amount, unit in parts)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def retry_hint_s(headers: Mapping[str, str]) -> float | None:
    """How long the server asked us to wait, from its response headers; None when it said nothing usable.

    ``Retry-After`` (seconds or an HTTP date) and ``retry-after-ms`` come first. Otherwise the
    ``x-ratelimit-reset-{requests,tokens}`` durations: of the limits whose ``x-ratelimit-remaining-*`` is 0, the
    latest reset (when none says 0, the latest of all); a plain ``x-ratelimit-reset`` last.
    """
    lowered = {str(name).lower(): str(value) for name, value in headers.items()}
    if "retry-after" in lowered and (hint := _seconds(lowered["retry-after"])) is not None:
        return hint
    for name in ("retry-after-ms", "x-ms-retry-after-ms"):
        if name in lowered and (millis := _seconds(lowered[name])) is not None:
            return millis / 1000.0
    resets: dict[str, float] = {}
    for unit in ("requests", "tokens"):
        value = lowered.get(f"x-ratelimit-reset-{unit}")
        if value is not None and (seconds := _seconds(value)) is not None:
            resets[unit] = seconds
    if resets:
        exhausted = [s for unit, s in resets.items() if lowered.get(f"x-ratelimit-remaining-{unit}", "").strip() == "0"]
        return max(exhausted or resets.values())
    value = lowered.get("x-ratelimit-reset")
    return _seconds(value) if value is not None else None
