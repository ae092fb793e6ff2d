"""Scoring a program `Decision`: the MCQ score plus what happened (answered, unparsed, failed)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from clearmed.metrics._mcq import score_mcq
from clearmed.metrics._rubric import RubricGrade, RubricGrader
from clearmed.signatures.records import AnswerMode, Decision, DecisionStatus, Question


class QuestionScore(BaseModel):
    """One scored question, the unit that `accuracy_summary` aggregates.

    Unparsed and failed decisions are wrong and flagged. For free-text questions `verdict` holds the judge's
    verdict and `judge_error` says when the judge itself failed (then the question counts as wrong too).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    question_id: str
    answer_mode: AnswerMode
    status: DecisionStatus
    correct: bool
    in_gold_set: bool = Field(description="lenient CLEAR-code rule (MCQ only): prediction within the gold set")
    unparsed: bool = False
    failed: bool = False
    multi: bool = False
    predicted: str | None = None
    gold: str | None = None
    verdict: str | None = None
    judge_error: str | None = None
    # The judge failed in a way a retry may mend (a 503, a timeout): the question is degraded and regraded on resume.
    judge_transient: bool = False
    # HealthBench: the rubric grade (points met over possible points); such questions have no accuracy.
    rubric_grade: RubricGrade | None = None


def check_same_question(question: Question, decision: Decision) -> None:
    if decision.question_id != question.id:
        raise ValueError(f"decision is for {decision.question_id!r}, not for question {question.id!r}")


def score_decision(question: Question, decision: Decision) -> QuestionScore:
    """Score an MCQ decision. Status `unparsed` / `failed` count as wrong and are flagged as such.

    Free-text questions need a judge: use `FreeTextGrader.score_decision` (MedRBench) or `RubricGrader`
    (HealthBench).
    """
    check_same_question(question, decision)
    if not question.is_mcq:
        raise ValueError(f"{question.id}: free-text questions are scored by FreeTextGrader or RubricGrader")
    answer = decision.answer if decision.status == "answered" else None
    mcq = score_mcq(question, answer)
    return QuestionScore(
        question_id=question.id,
        answer_mode=question.answer_mode,
        status=decision.status,
        correct=mcq.correct,
        in_gold_set=mcq.in_gold_set,
        unparsed=decision.status == "unparsed" or (decision.status == "answered" and mcq.unparsed),
        failed=decision.status == "failed",
        multi=mcq.multi,
        predicted=",".join(mcq.predicted) if mcq.predicted else None,
        gold=",".join(mcq.gold),
    )


def score_rubric_decision(grader: RubricGrader, question: Question, decision: Decision) -> QuestionScore:
    """Grade a decision's response against the question's HealthBench rubric (no response: nothing met)."""
    check_same_question(question, decision)
    response = None
    if decision.status == "answered":
        response = decision.response or (decision.answer.display() if decision.answer else None)
    grade = grader.grade(question, response)
    return QuestionScore(
        question_id=question.id,
        answer_mode=question.answer_mode,
        status=decision.status,
        correct=False,
        in_gold_set=False,
        unparsed=decision.status == "unparsed",
        failed=decision.status == "failed",
        predicted=response,
        verdict="rubric",
        judge_error=f"{grade.n_failed_items} rubric items could not be graded" if grade.n_failed_items else None,
        judge_transient=grade.n_transient_items > 0,
        rubric_grade=grade,
    )
