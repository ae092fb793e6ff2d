"""`RunSummary.empty_searches` (issue 58, item 10): a question counts when a web search of it came back with no page
at all: the dynamic pathway's (its recorded error) or a follow-up's (a round that searched and got nothing, new or
already held, without a failure). A round that found only pages the bundle held, or that failed, does not count."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from clearmed.evaluation.store import EvalRecord, RunManifest
from clearmed.evaluation.summary import summarize
from clearmed.signatures.records import (
    Answer,
    Candidate,
    Decision,
    EvidenceBundle,
    FollowUpRound,
    Question,
    StepError,
)

QUESTION = Question(id="q", text="Which hormone?", options={"A": "Cortisol", "B": "Insulin"}, gold_letters=["A"])
A = Answer(letters=("A",))
ANSWERED = [Candidate(pathway="parametric", answer=A), Candidate(pathway="local", answer=A)]


def summarized(candidates: list[Candidate], followups: list[FollowUpRound]) -> int:
    bundle = EvidenceBundle(question=QUESTION, candidates=candidates, followups=followups)
    decision = Decision(question_id="q", status="answered", bundle=bundle, program="clear")
    record = EvalRecord(
        question_id="q", index=0, program="clear", decision=decision, score=None, seconds=1.0, finished="now"
    )
    now = datetime.now(UTC).isoformat(timespec="seconds")
    manifest = RunManifest(program="clear", benchmark="b", source="s", config_source="c", config_digest="0" * 16,
                           question_ids=["q"], created=now, clearmed_version="test")  # fmt: skip
    return summarize([record], manifest).empty_searches


NOTHING = StepError(stage="dynamic_search", kind="search_error", message="the search found nothing")
FAILED = StepError(stage="dynamic_search", kind="search_error", message="timeout: no reply", transient=True)
FAILED_FOLLOWUP = FAILED.model_copy(update={"stage": "followup_search"})


@pytest.mark.parametrize(
    ("dynamic_error", "followups", "counted"),
    [
        (NOTHING, [], 1),  # the dynamic pathway's search found nothing
        (FAILED, [], 0),  # it failed: degraded, not empty
        (None, [], 0),
        (None, [FollowUpRound(trigger="guard", query="cortisol addison", excluded=[])], 1),  # a follow-up found none
        (None, [FollowUpRound(trigger="guard", query="cortisol addison", excluded=["https://a"])], 0),  # only known
        (None, [FollowUpRound(trigger="guard", query="cortisol", error=FAILED_FOLLOWUP)], 0),  # it failed
        (None, [FollowUpRound(trigger="guard", query="")], 0),  # no search was made (no query)
    ],
)
def test_a_question_counts_when_a_web_search_of_it_found_no_page(
    dynamic_error: StepError | None, followups: list[FollowUpRound], counted: int
) -> None:
    dynamic = Candidate(pathway="dynamic", answer=None if dynamic_error else A, error=dynamic_error)
    assert summarized([*ANSWERED, dynamic], followups) == counted
