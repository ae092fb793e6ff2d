"""The run's grader: MCQ by exact set; free text (MedRBench grader, HealthBench rubric) by the grading model, the
config's `[backbones.judge]`, when there is one. Each grade's calls reach the run's spend log (`spend_log`) as it
completes, so the budget counts grading too."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import dspy
from dspy.utils.usage_tracker import UsageTracker

from clearmed.config import ClearmedConfig
from clearmed.evaluation.runner import Scorer, default_scorer
from clearmed.metrics import FreeTextGrader, QuestionScore, RubricGrader, score_rubric_decision
from clearmed.programs.lm.context import USAGE_SINK
from clearmed.signatures.records import CallUsage, Decision, Question

T = TypeVar("T")


def metered(model: str, grade: Callable[[], T]) -> T:
    """`grade()`, with the usage of the grading calls it made passed to the spend log as one "grading" row."""
    tracker = UsageTracker()
    started = time.perf_counter()
    try:
        with dspy.context(usage_tracker=tracker):
            return grade()
    finally:
        entries = [entry for per_model in tracker.usage_data.values() for entry in per_model]
        sink = USAGE_SINK.get()
        if entries and sink is not None:
            sink(
                CallUsage(
                    stage="grading",
                    role="judge",
                    model=model,
                    calls=len(entries),
                    prompt_tokens=sum(int(e.get("prompt_tokens") or 0) for e in entries),
                    completion_tokens=sum(int(e.get("completion_tokens") or 0) for e in entries),
                    seconds=round(time.perf_counter() - started, 4),
                )
            )


def grader_for(config: ClearmedConfig) -> Scorer:
    """MCQ questions: exact-set accuracy. Free text and rubrics: the `[backbones.judge]` model, else unscored."""
    grading = config.backbones.get("judge")  # the grading model's config role
    if grading is None:
        return default_scorer
    from clearmed.backbones.factory import build_lm

    grader_lm = build_lm(grading, role="judge", source=config.source)
    free_text = FreeTextGrader(grader_lm)
    rubric = RubricGrader(grader_lm)

    def score(question: Question, decision: Decision) -> QuestionScore | None:
        if question.is_mcq:
            return default_scorer(question, decision)
        if question.rubric:
            return metered(grading.model, lambda: score_rubric_decision(rubric, question, decision))
        return metered(grading.model, lambda: free_text.score_decision(question, decision))

    return score
