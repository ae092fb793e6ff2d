"""The wait between retries: the server's hint (Retry-After, x-ratelimit-reset-*) or jittered backoff, capped, and
every retry counted in the caller's scope. Pure functions here; real HTTP in test_client.py."""

from __future__ import annotations

import asyncio
import random
import threading
import time
import types
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from dspy.clients import execution
from dspy.utils.exceptions import LMRateLimitError

from clearmed.backbones.config import HostedBackbone
from clearmed.backbones.factory import build_lm
from clearmed.backbones.retry_wait import MAX_RETRY_WAIT_S, server_hint_s
from clearmed.core.retries import JITTER_S, backoff_delay, count_retries, note_retry, retry_hint_s, retrying


def test_backoff_without_a_hint_doubles_with_jitter_and_is_capped() -> None:
    rng = random.Random(7)
    for attempt in range(8):
        waits = [backoff_delay(attempt, rng=rng) for _ in range(200)]
        full = min(2.0**attempt, MAX_RETRY_WAIT_S)
        assert min(waits) >= full / 2
        assert max(waits) <= full
        assert len(set(waits)) > 100  # jittered: threads throttled together do not return together


def test_a_hint_is_honoured_with_jitter_and_capped() -> None:
    rng = random.Random(1)
    waits = [backoff_delay(0, 3.0, rng=rng) for _ in range(100)]
    assert all(3.0 <= wait <= 3.0 + JITTER_S for wait in waits)
    assert backoff_delay(5, 3600.0) == MAX_RETRY_WAIT_S  # an hour's Retry-After does not stall the run
    assert all(0.02 <= backoff_delay(0, 0.02, rng=rng) <= 0.12 for _ in range(100))  # a short hint, a short jitter


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s"}, 360.0),
        (
            {
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "20ms",
                "x-ratelimit-remaining-tokens": "1200",
                "x-ratelimit-reset-tokens": "6m0s",
            },
            0.02,  # the exhausted limit decides, not the longer one that still has room
        ),
        ({"x-ratelimit-reset-tokens": "2m59.5s"}, 179.5),
        ({"x-ratelimit-reset": "12"}, 12.0),
        ({"Retry-After": "soon"}, None),
        ({"x-ratelimit-reset-requests": "forever"}, None),
        ({}, None),
    ],
)
def test_server_hints_from_headers(headers: dict[str, str], expected: float | None) -> None:
    assert retry_hint_s(headers) == (pytest.approx(expected) if expected is not None else None)


def test_retry_after_as_an_http_date_and_a_reset_as_an_epoch() -> None:
    when = datetime.now(UTC) + timedelta(seconds=30)
    assert 25 <= (retry_hint_s({"Retry-After": format_datetime(when, usegmt=True)}) or 0) <= 30
    assert 8 <= (retry_hint_s({"x-ratelimit-reset": str(int(time.time()) + 10)}) or 0) <= 10


def test_the_hint_comes_from_dspys_error_or_its_headers() -> None:
    assert server_hint_s(LMRateLimitError("slow down", retry_after=4.0)) == 4.0
    error = LMRateLimitError("slow down")
    error.rate_limit_headers = {"x-ratelimit-remaining-requests": ("0",), "x-ratelimit-reset-requests": ("2s",)}
    assert server_hint_s(error) == 2.0
    assert server_hint_s(LMRateLimitError("slow down")) is None


def test_the_hint_from_an_sdk_error_the_litellm_engine_wrapped() -> None:
    class SDKError(Exception):
        def __init__(self) -> None:
            super().__init__("429")
            self.response = types.SimpleNamespace(headers={"x-ratelimit-reset-tokens": "3s"})

    error = LMRateLimitError("slow down")
    error.__cause__ = SDKError()
    assert server_hint_s(error) == 3.0


def test_a_retry_of_the_tenacity_policy_waits_the_hint_and_is_counted_in_every_open_scope() -> None:
    waited: list[float] = []
    errors = iter([LMRateLimitError("slow down", retry_after=2.0), LMRateLimitError("slow down")])

    def attempt() -> str:
        error = next(errors, None)
        if error is not None:
            raise error
        return "done"

    with count_retries() as outer:
        policy = retrying("lm", 3, transient=lambda exc: True, hint=server_hint_s, sleep=waited.append)
        with count_retries() as inner:
            assert policy(attempt) == "done"
    assert 2.0 <= waited[0] <= 2.0 + JITTER_S  # the server's Retry-After, jittered
    assert 0.5 <= waited[1] <= 2.0  # no hint: the second backoff step, 1-2 s
    assert inner.by_service == outer.by_service == {"lm": 2}
    assert outer.waited_s == pytest.approx(sum(waited))
    note_retry("lm", 1.0)  # outside any scope: nothing to count, nothing raised


def test_the_policy_raises_a_failure_it_does_not_retry_at_once_and_the_last_one_as_it_came() -> None:
    calls: list[int] = []

    def refused() -> None:
        calls.append(1)
        raise PermissionError("no")

    with pytest.raises(PermissionError):
        retrying("lm", 3, transient=lambda exc: isinstance(exc, TimeoutError), sleep=lambda s: None)(refused)
    assert len(calls) == 1
    with count_retries() as tally, pytest.raises(PermissionError):
        retrying("lm", 2, transient=lambda exc: True, sleep=lambda s: None)(refused)
    assert len(calls) == 4  # 1 + 2 retries
    assert tally.total == 2  # the wait tenacity computes after the last attempt is never slept, nor counted


def test_scopes_are_per_thread_and_per_task() -> None:
    totals: dict[str, int] = {}
    start = threading.Barrier(3)

    def worker(name: str, count: int) -> None:
        with count_retries() as tally:
            start.wait()
            for _ in range(count):
                note_retry("lm", 0.0)
        totals[name] = tally.total

    threads = [threading.Thread(target=worker, args=(str(n), n)) for n in (1, 2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert totals == {"1": 1, "2": 2, "3": 3}

    async def task(count: int) -> int:
        with count_retries() as tally:
            for _ in range(count):
                note_retry("lm", 0.0)
                await asyncio.sleep(0)
        return tally.total

    async def both() -> list[int]:
        return list(await asyncio.gather(task(4), task(6)))

    assert asyncio.run(both()) == [4, 6]


def test_a_scope_is_shared_with_threads_started_under_its_context() -> None:
    import contextvars

    with count_retries() as tally:
        threads = [
            threading.Thread(target=contextvars.copy_context().run, args=(note_retry, "lm", 0.5)) for _ in range(20)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert tally.total == 20
    assert tally.waited_s == pytest.approx(10.0)


def test_dspy_never_retries_a_built_lm_itself_and_its_wait_is_left_as_shipped() -> None:
    """Before: building an LM replaced DSPy's private `execution._delay`, which no built LM ever reached."""
    shipped = execution._delay
    lm = build_lm(HostedBackbone(kind="hosted", model="ollama_chat/llama3", num_retries=4))
    assert execution._delay is shipped
    assert execution._delay.__module__ == "dspy.clients.execution"
    assert (lm.num_retries, lm.max_retries) == (0, 4)  # DSPy makes one attempt; clearmed retries four times
