"""Option scoring under the LM client's failure policy (issue 32 item 4): retried with the same backoff and counted,
fatal refusals stop the run, a deadline per attempt, and a failure after the retries is a transient `ScoringError`
(the pathway then generates, with the failure on its usage row: tests/reliability/test_lm_scoring.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from clearmed.backbones.logprobs import OpenAICompatibleScorer, ScoringError
from clearmed.core import http as http_client
from clearmed.core.errors import FatalServiceError
from clearmed.core.retries import count_retries

from .replay_server import REPLIES, ReplayServer, Reply

KEY = "sk-score-0123456789abcdef"
SCORED = {
    "choices": [
        {
            "logprobs": {
                "content": [{"top_logprobs": [{"token": "A", "logprob": -0.1}, {"token": "B", "logprob": -2.5}]}]
            }
        }
    ],
    "usage": {"prompt_tokens": 12},
}
THROTTLED = Reply(
    429, {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}, headers={"Retry-After": "1"}
)
BUSY = Reply(503, {"error": {"message": "The engine is currently overloaded", "type": "server_error"}})


@pytest.fixture(autouse=True)
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    asked: list[float] = []
    monkeypatch.setattr(http_client, "pause", asked.append)
    return asked


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    with ReplayServer() as fake:
        yield fake


def score(server: ReplayServer, **options: object) -> object:
    scorer = OpenAICompatibleScorer(server.api_base, "m", KEY, service="main backbone openai/m", **options)  # type: ignore[arg-type]
    return scorer.score_next_token([{"role": "user", "content": "A or B?"}], "", ["A", "B"])


def test_a_throttled_scoring_pass_is_retried_after_retry_after_and_counted(
    server: ReplayServer, waits: list[float]
) -> None:
    """Before: one request, no backoff; a 429 silently switched the pathway to generation."""
    server.chat = [THROTTLED, Reply(200, SCORED)]
    with count_retries() as retries:
        result = score(server)
    assert result.distribution()["A"] > 0.8  # type: ignore[attr-defined]
    assert retries.by_service == {"lm": 1}
    assert len(waits) == 1
    assert 1.0 <= waits[0] <= 2.0


@pytest.mark.parametrize("case", REPLIES["malformed_200"], ids=[c["name"] for c in REPLIES["malformed_200"]])
def test_a_200_that_is_no_reply_is_retried(server: ReplayServer, case: dict[str, str]) -> None:
    server.chat = [Reply(200, text=case["text"], content_type=case["content_type"]), Reply(200, SCORED)]
    with count_retries() as retries:
        score(server)
    assert retries.total == 1


def test_still_failing_after_the_retries_is_a_transient_scoring_error(server: ReplayServer) -> None:
    server.chat = [BUSY] * 5
    with count_retries() as retries, pytest.raises(ScoringError, match="HTTP 503") as raised:
        score(server, num_retries=2)
    assert raised.value.transient
    assert retries.total == 2
    assert len(server.chat_requests()) == 3


@pytest.mark.parametrize(
    ("reply", "cause"),
    [
        (
            Reply(401, {"error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}}),
            "authentication failed",
        ),
        (
            Reply(429, {"error": {"message": "You exceeded your current quota.", "code": "insufficient_quota"}}),
            "billing or quota exhausted",
        ),
        (Reply(402, {"error": {"message": "Payment required."}}), "billing or quota exhausted"),
        (
            Reply(404, {"error": {"message": "The model `m` does not exist.", "code": "model_not_found"}}),
            "model not found",
        ),
    ],
)
def test_fatal_refusals_stop_the_run_like_the_lm_client(server: ReplayServer, reply: Reply, cause: str) -> None:
    server.chat = [reply] * 3
    with count_retries() as retries, pytest.raises(FatalServiceError) as raised:
        score(server)
    message = str(raised.value)
    assert message.startswith(f"main backbone openai/m: {cause} (HTTP {reply.status})")
    assert KEY not in message
    assert "\n" not in message
    assert retries.total == 0
    assert len(server.chat_requests()) == 1


def test_a_refused_request_is_not_retried(server: ReplayServer) -> None:
    server.chat = [Reply(400, {"error": {"message": "logprobs are not supported"}})] * 3
    with pytest.raises(ScoringError, match="not supported") as raised:
        score(server)
    assert not raised.value.transient
    assert len(server.chat_requests()) == 1


def test_each_scoring_attempt_has_a_deadline(server: ReplayServer) -> None:
    server.chat = [Reply(200, SCORED, trickle_s=0.5)]
    with pytest.raises(ScoringError, match="DeadlineExceeded") as raised:
        score(server, timeout=1.0, num_retries=0)
    assert raised.value.transient
