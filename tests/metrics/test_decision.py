from __future__ import annotations

import pytest

from clearmed.metrics import score_decision
from clearmed.signatures.records import Answer, Decision, DecisionStatus, EvidenceBundle, Question

OPTIONS = {"A": "a", "B": "b", "C": "c"}
QUESTION = Question(id="q1", text="q", answer_mode="multi", options=OPTIONS, gold_letters=["A", "B"])


def _decision(status: DecisionStatus, answer: Answer | None = None, question_id: str = "q1") -> Decision:
    return Decision(
        question_id=question_id,
        status=status,
        answer=answer,
        bundle=EvidenceBundle(question=QUESTION, candidates=[]),
    )


def test_answered_decision() -> None:
    score = score_decision(QUESTION, _decision("answered", Answer.of_letters("A", "B")))
    assert score.correct
    assert score.in_gold_set
    assert not score.unparsed
    assert not score.failed
    assert score.predicted == "A,B"
    assert score.gold == "A,B"
    assert score.multi


def test_partial_multi_answer_is_wrong_but_in_gold_set() -> None:
    score = score_decision(QUESTION, _decision("answered", Answer.of_letters("B")))
    assert not score.correct
    assert score.in_gold_set


@pytest.mark.parametrize(("status", "unparsed", "failed"), [("unparsed", True, False), ("failed", False, True)])
def test_unparsed_and_failed_count_wrong_and_are_flagged(status: DecisionStatus, unparsed: bool, failed: bool) -> None:
    # Even if an answer was left on the decision, a non-answered status is never credited.
    score = score_decision(QUESTION, _decision(status, Answer.of_letters("A", "B")))
    assert not score.correct
    assert not score.in_gold_set
    assert (score.unparsed, score.failed, score.status) == (unparsed, failed, status)


def test_answered_without_answer_is_unparsed() -> None:
    score = score_decision(QUESTION, _decision("answered", None))
    assert score.unparsed
    assert not score.correct


def test_decision_for_another_question_is_refused() -> None:
    with pytest.raises(ValueError, match="decision is for 'other'"):
        score_decision(QUESTION, _decision("answered", Answer.of_letters("A"), question_id="other"))


def test_free_text_questions_need_a_judge() -> None:
    free = Question(id="q1", text="q", answer_mode="free_text", gold_text="x")
    decision = Decision(
        question_id="q1",
        status="answered",
        answer=Answer.of_text("x"),
        bundle=EvidenceBundle(question=free, candidates=[]),
    )
    with pytest.raises(ValueError, match="FreeTextGrader or RubricGrader"):
        score_decision(free, decision)
