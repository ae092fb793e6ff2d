"""A failed scoring pass is never silent (issue 32 item 4): a refused key stops the run as for a generated answer; any
other failure after the scorer's retries is on the usage row, with why, and the pathway generates instead."""

from __future__ import annotations

from collections.abc import Sequence

import dspy
import pytest

from clearmed.backbones.logprobs import NextTokenScores, ScoringError
from clearmed.core.errors import FatalServiceError
from clearmed.programs.lm.context import RunContext, activate
from clearmed.programs.pathways import scored_answer as option_scoring
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import QUESTION

pytestmark = pytest.mark.reliability

CATEGORY = "failing dependencies"


class FailingScorer:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def score_next_token(
        self, messages: Sequence[dict[str, str]], prefix: str, candidates: Sequence[str]
    ) -> NextTokenScores:
        raise self.error


def scored(monkeypatch: pytest.MonkeyPatch, error: Exception) -> RunContext:
    monkeypatch.setattr(option_scoring, "token_scorer", lambda lm: FailingScorer(error))
    context = RunContext(settings=ProgramSettings(mcq_decoding="score"), role_lms={"main": dspy.utils.DummyLM([])})
    with activate(context):
        result = option_scoring.run_scored_stage(
            "parametric", dspy.Predict("question -> answer"), QUESTION, question=QUESTION.text
        )
    assert result is None  # the caller generates
    return context


def test_a_scoring_failure_after_the_retries_is_recorded_with_why(reliability, monkeypatch: pytest.MonkeyPatch) -> None:
    with reliability.case(CATEGORY, "scoring 503 after the retries: recorded on the row, generation instead"):
        context = scored(
            monkeypatch, ScoringError("scoring request answered HTTP 503: overloaded (after 3 retries)", transient=True)
        )
        (row,) = context.ledger.rows
        assert row.failed
        assert row.error == "ScoringError: scoring request answered HTTP 503: overloaded (after 3 retries)"


def test_a_refused_key_while_scoring_stops_the_run(reliability, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: `except Exception` swallowed the FatalServiceError and the run went on generating."""
    with reliability.case(CATEGORY, "scoring with a revoked key: the run stops with one line"):
        fatal = FatalServiceError("main backbone openai/m", "auth", "Incorrect API key provided.", status=401)
        with pytest.raises(FatalServiceError):
            scored(monkeypatch, fatal)
