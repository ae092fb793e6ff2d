"""Retries of calls to outside services: one backoff policy, and a per-call count that callers can read.

Every client retries through tenacity with this policy (`retrying`, `retrying_async`: `backoff_delay` as the wait,
`pause` as the sleep): LM calls (`clearmed.backbones.client`), the backbone's own HTTP requests
(`clearmed.core.http`) and Tavily searches (`clearmed.retrieval.tavily`). Each retry is reported with
`note_retry`, which adds it to every `count_retries()` scope open in the calling context, so a caller learns how many
retries one call took without a counter threaded through DSPy:

    with count_retries() as retries:
        prediction = predictor(**inputs)
    row.retries = retries.total

Scopes are context-local (`contextvars`): concurrent threads and asyncio tasks count apart, and a scope opened in a
parent is shared with worker threads started under a copy of its context (the tally is locked for that).

A metered service also reports what a call billed with `note_credits` (Tavily: credits by search depth), so the same
scope tells a caller what the call cost, and a cache hit, which never reaches the service, costs nothing.

The retries of a call can be cut: `pause`, the wait between retries, ends at once when the retries are cut:
`cut_retries()`, which a second Ctrl-C calls (`second_interrupt_cuts_retries`). A cut chain raises `RetriesCut`, a
`KeyboardInterrupt`, so no step records it as its failure. The cut also ends every attempt in flight: each attempt's
own total deadline, and the one watchdog thread that keeps it, are `clearmed.core.deadlines` (`bounded_call`).
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from email.utils import parsedate_to_datetime
from typing import Any, Final

from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt

__all__ = [
    "JITTER_S",
    "MAX_RETRY_WAIT_S",
    "RetriesCut",
    "RetryTally",
    "backoff_delay",
    "count_retries",
    "cut_retries",
    "note_credits",
    "note_retry",
    "pause",
    "reset_cut",
    "retries_cut",
    "retry_hint_s",
    "retrying",
    "retrying_async",
    "second_interrupt_cuts_retries",
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


class RetriesCut(KeyboardInterrupt):
    """The user asked twice to stop: the retry chain (or the attempt in flight) was cut short."""


# Set by a second Ctrl-C: every wait between retries, and every attempt `bounded_call` is running, ends at once.
_CUT = threading.Event()


def cut_retries() -> None:
    """End every retry chain now (until `reset_cut`): waits and bounded attempts raise `RetriesCut`."""
    _CUT.set()


def reset_cut() -> None:
    _CUT.clear()


def retries_cut() -> bool:
    return _CUT.is_set()


def pause(seconds: float) -> None:
    """Wait ``seconds`` before a retry; `RetriesCut` as soon as the retries are cut."""
    if _CUT.wait(max(0.0, seconds)):
        raise RetriesCut("retries cut short")


def _policy(
    service: str,
    retries: int,
    transient: Callable[[BaseException], bool],
    hint: Callable[[BaseException], float | None] | None,
) -> dict[str, Any]:
    """tenacity's arguments for the policy: ``retries`` retries of a ``transient`` failure (never once the retries are
    cut), waiting `backoff_delay` with the server's ``hint``, each retry counted under ``service``; anything else, or
    the last failure, raised as it came."""

    def wait(state: RetryCallState) -> float:
        failed = state.outcome.exception() if state.outcome is not None else None
        asked = hint(failed) if hint is not None and failed is not None else None
        return backoff_delay(state.attempt_number - 1, asked)

    def counted(state: RetryCallState) -> None:
        # Counted right before the sleep: tenacity also computes a wait after the last attempt, which never sleeps.
        note_retry(service, state.next_action.sleep if state.next_action is not None else 0.0)

    return {
        "stop": stop_after_attempt(retries + 1),
        "retry": retry_if_exception(lambda exc: transient(exc) and not retries_cut()),
        "wait": wait,
        "before_sleep": counted,
        "reraise": True,
    }


def retrying(
    service: str,
    retries: int,
    *,
    transient: Callable[[BaseException], bool],
    hint: Callable[[BaseException], float | None] | None = None,
    sleep: Callable[[float], None] | None = None,
) -> Retrying:
    """A tenacity `Retrying` by clearmed's policy (`_policy`); it sleeps with `pause` (or ``sleep``), so a second
    Ctrl-C ends the wait at once."""
    return Retrying(sleep=sleep or pause, **_policy(service, retries, transient, hint))


def retrying_async(
    service: str,
    retries: int,
    *,
    transient: Callable[[BaseException], bool],
    hint: Callable[[BaseException], float | None] | None = None,
) -> AsyncRetrying:
    """`retrying` for coroutines: the wait is an ``asyncio.sleep``, and a cut ends the chain after it."""

    async def sleep(seconds: float) -> None:
        await asyncio.sleep(seconds)
        if retries_cut():
            raise RetriesCut("retries cut short")

    return AsyncRetrying(sleep=sleep, **_policy(service, retries, transient, hint))


@contextmanager
def second_interrupt_cuts_retries() -> Iterator[None]:
    """Within the block, Ctrl-C interrupts the main thread as usual (a run then lets its questions in flight finish),
    and a second Ctrl-C also cuts every retry chain and attempt in flight, so those questions end at once instead of
    after their retries. Outside the main thread (no signal handler can be set there) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    presses = 0

    def on_interrupt(signum: int, frame: object) -> None:
        nonlocal presses
        presses += 1
        if presses >= 2:
            cut_retries()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
