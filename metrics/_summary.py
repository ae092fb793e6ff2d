"""Aggregating `QuestionScore`s: accuracy with Wilson and bootstrap intervals and the failure counts."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pydantic import BaseModel, ConfigDict, Field

from clearmed.metrics._decision import QuestionScore
from clearmed.metrics._intervals import Interval, bootstrap_interval, wilson_interval


class AccuracySummary(BaseModel):
    """Accuracy over n questions. `accuracy` is exact-set accuracy; the lenient CLEAR-code rule is reported
    only as `in_gold_set_accuracy` (it differs from `accuracy` only on multi-answer questions)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int
    correct: int
    accuracy: float | None
    wilson: Interval | None
    bootstrap: Interval | None
    unparsed: int
    failed: int
    counted_wrong: int = Field(
        default=0, description="questions counted wrong whatever they answered (a run's degraded questions)"
    )
    judge_failed: int = 0
    partially_correct: int = 0
    in_gold_set: int = Field(description="lenient CLEAR-code rule: prediction within the gold set")
    in_gold_set_accuracy: float | None = Field(description="lenient CLEAR-code rule, not the headline number")
    n_multi: int
    multi_exact_correct: int
    multi_in_gold_set: int
    seed: int
    n_resamples: int


def accuracy_summary(
    scores: Sequence[QuestionScore],
    *,
    counted_wrong: Collection[str] = (),
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> AccuracySummary:
    """Summarise scores. Every question counts in `n`, including unparsed and failed ones (they are wrong), and
    the questions whose ids are in `counted_wrong` count as wrong whatever their score says."""
    ids = [score.question_id for score in scores]
    if len(set(ids)) != len(ids):
        raise ValueError("the same question is scored twice; deduplicate before summarising")
    wrong = set(counted_wrong)
    scores = [
        score.model_copy(update={"correct": False, "in_gold_set": False}) if score.question_id in wrong else score
        for score in scores
    ]
    n = len(scores)
    correct = sum(score.correct for score in scores)
    lenient = sum(score.in_gold_set for score in scores)
    multi = [score for score in scores if score.multi]
    return AccuracySummary(
        n=n,
        correct=correct,
        accuracy=correct / n if n else None,
        wilson=wilson_interval(correct, n, confidence=confidence) if n else None,
        bootstrap=(
            bootstrap_interval(
                [float(score.correct) for score in scores],
                confidence=confidence,
                n_resamples=n_resamples,
                seed=seed,
            )
            if n
            else None
        ),
        unparsed=sum(score.unparsed for score in scores),
        failed=sum(score.failed for score in scores),
        counted_wrong=sum(score_id in wrong for score_id in ids),
        judge_failed=sum(score.judge_error is not None for score in scores),
        partially_correct=sum(score.verdict == "partially_correct" for score in scores),
        in_gold_set=lenient,
        in_gold_set_accuracy=lenient / n if n else None,
        n_multi=len(multi),
        multi_exact_correct=sum(score.correct for score in multi),
        multi_in_gold_set=sum(score.in_gold_set for score in multi),
        seed=seed,
        n_resamples=n_resamples,
    )
