"""The summary's money has one source, the spend log: its dollars, credits and retries, per stage and in total."""

from __future__ import annotations

import pytest

from clearmed.evaluation.spend import spend_summary
from clearmed.signatures.records import CallUsage, Decision, EvidenceBundle, Question

QUESTION = Question(id="q", text="Which hormone?", options={"A": "Cortisol", "B": "Insulin"}, gold_letters=["A"])


def decision(*rows: CallUsage) -> Decision:
    return Decision(
        question_id="q", status="answered", bundle=EvidenceBundle(question=QUESTION, candidates=[]), usage=list(rows)
    )


def test_dollars_credits_and_retries_come_from_the_log_when_there_is_one() -> None:
    recorded = decision(CallUsage(stage="parametric", prompt_tokens=10), CallUsage(stage="verifier", retries=1))
    paid = [
        (0.25, CallUsage(stage="parametric", prompt_tokens=10)),  # the attempt a kill cut short
        (0.25, CallUsage(stage="parametric", prompt_tokens=10, retries=2)),  # the redo, recorded
        (0.5, CallUsage(stage="dynamic_search", role="tool", credits=2.0)),  # a stage no record holds now
    ]
    spend = spend_summary([recorded], [0.25], paid=paid)
    assert spend.usd == 1.0
    assert spend.mean_usd == 1.0
    stages = {stage.stage: stage for stage in spend.by_stage}
    assert stages["parametric"].usd == 0.5
    assert stages["parametric"].calls == 1  # calls and tokens are the records'
    assert stages["dynamic_search"].credits == 2.0
    assert spend.search_credits == 2.0
    # the log's retries (2 for parametric); the verifier's retried call cost nothing and is in no older log: the
    # record's count stands
    assert (stages["parametric"].retries, stages["verifier"].retries, spend.retries) == (2, 1, 3)


def test_without_a_log_the_records_are_the_source() -> None:
    recorded = decision(CallUsage(stage="parametric", prompt_tokens=10, retries=1))
    spend = spend_summary([recorded], [0.4])
    assert (spend.usd, spend.retries) == (0.4, 1)
    assert spend.by_stage[0].usd is None  # per-stage dollars need prices


@pytest.mark.parametrize("logged", [0.3, None])
def test_an_unknown_price_is_never_counted_as_free(logged: float | None) -> None:
    recorded = decision(CallUsage(stage="parametric", prompt_tokens=10))
    assert spend_summary([recorded], [None], paid=[(0.3, CallUsage(stage="parametric"))]).usd is None
    assert spend_summary([recorded], [0.3], paid=[(logged, CallUsage(stage="parametric"))]).usd == logged
