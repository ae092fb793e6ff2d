"""Scoring one multiple-choice answer. Parsing model output into an `Answer` happens before this, elsewhere;
this module only compares letter sets."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from clearmed.signatures.records import Answer, Question


class McqScore(BaseModel):
    """One MCQ answer against the gold set.

    `correct` is exact set equality (single answer: the one gold letter). `in_gold_set` is the lenient rule
    of the CLEAR code ("the prediction lies within the gold set": non-empty and a subset of the gold), which
    credits one right letter of a multi-answer question; it is reported separately and never as accuracy.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    question_id: str
    gold: tuple[str, ...]
    predicted: tuple[str, ...] | None = None
    correct: bool
    in_gold_set: bool = Field(description="lenient CLEAR-code rule: prediction non-empty and within the gold set")
    unparsed: bool
    multi: bool = Field(description="the gold has several letters or the question is multi-answer")


def gold_of(question: Question) -> tuple[str, ...]:
    if not question.is_mcq:
        raise ValueError(f"{question.id}: a free-text question has no gold letters; use a judge to score it")
    if not question.gold_letters:
        raise ValueError(f"{question.id}: the question has no gold letters (unlabelled), it cannot be scored")
    return tuple(sorted(set(question.gold_letters)))


def score_mcq(question: Question, predicted: Answer | None) -> McqScore:
    """Exact-set and in-gold-set scores; `None` or a text answer to an MCQ counts as unparsed (and wrong)."""
    gold = gold_of(question)
    multi = question.answer_mode == "multi" or len(gold) > 1
    if predicted is None or not predicted.letters:
        return McqScore(
            question_id=question.id, gold=gold, correct=False, in_gold_set=False, unparsed=True, multi=multi
        )
    letters = predicted.letters
    return McqScore(
        question_id=question.id,
        gold=gold,
        predicted=letters,
        correct=set(letters) == set(gold),
        in_gold_set=set(letters) <= set(gold),
        unparsed=False,
        multi=multi,
    )
