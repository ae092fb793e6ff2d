"""HealthBench rubric grading: one judge call per criterion, then simple-evals' `calculate_score`.

Per example: score = sum(points of met criteria) / sum(points of positive criteria). Negative-point
criteria subtract when met, so an example score can fall below 0; it is not clipped. The benchmark score is
the mean over examples clipped to [0, 1], with the bootstrap std of that clipped mean (`_aggregate_get_clipped_mean`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, ConfigDict

from clearmed.core.errors import FatalServiceError
from clearmed.metrics._errors import describe_error, is_transient
from clearmed.signatures.records import ChatTurn, Question, RubricItem

if TYPE_CHECKING:
    import dspy


class RubricItemGrade(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    criterion: str
    points: float
    tags: list[str]
    criteria_met: bool | None
    explanation: str = ""
    error: str | None = None
    attempts: int = 0
    transient: bool = False  # the last attempt failed in a way a retry may mend


class RubricGrade(BaseModel):
    """One example's grade. `score is None` when a criterion could not be graded or no criterion is positive."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question_id: str
    items: list[RubricItemGrade]
    score: float | None
    tag_scores: dict[str, float]
    example_tags: list[str]
    n_failed_items: int
    n_transient_items: int = 0  # of the failed items, those a later attempt may grade: the question is regraded


def rubric_score(items: Sequence[RubricItem], met: Sequence[bool]) -> float | None:
    """simple-evals `calculate_score`: met points over positive points; None without positive points."""
    if len(items) != len(met):
        raise ValueError(f"{len(items)} rubric items but {len(met)} grades")
    possible = sum(item.points for item in items if item.points > 0)
    if possible <= 0:
        return None
    return sum(item.points for item, ok in zip(items, met, strict=True) if ok) / possible


def render_conversation(turns: Sequence[ChatTurn]) -> str:
    """simple-evals rendering: "role: content" blocks separated by blank lines."""
    return "\n\n".join(f"{turn.role}: {turn.content}" for turn in turns)


def render_rubric_item(item: RubricItem) -> str:
    points = int(item.points) if float(item.points).is_integer() else item.points
    return f"[{points}] {item.criterion}"


def _tag_scores(items: Sequence[RubricItem], met: Sequence[bool]) -> dict[str, float]:
    by_tag: dict[str, list[int]] = defaultdict(list)
    for position, item in enumerate(items):
        for tag in item.tags:
            by_tag[tag].append(position)
    scores: dict[str, float] = {}
    for tag, positions in sorted(by_tag.items()):
        value = rubric_score([items[i] for i in positions], [met[i] for i in positions])
        if value is not None:
            scores[tag] = value
    return scores


class RubricGrader:
    """Grades a response against a HealthBench question's rubric with the judge's own LM.

    simple-evals retries a grader call until `criteria_met` parses as a bool; here each criterion gets up to
    `max_attempts` calls (later attempts use a new `rollout_id` so a cache cannot replay the bad answer). A
    criterion that still fails is recorded with its error and the example gets `score=None`; when it failed in a way a
    retry may mend (a 503, a timeout) the question is degraded and regraded on resume. A `FatalServiceError` (a
    revoked or exhausted judge key) is raised: the run stops.
    """

    def __init__(self, grader_lm: dspy.BaseLM, *, max_attempts: int = 3) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.grader_lm = grader_lm
        self.max_attempts = max_attempts
        # DSPy is loaded by the grader alone: scoring and tuning over stored runs never grade (tests/test_layers.py).
        import dspy

        from clearmed.signatures.grading import GradeRubricItem

        self.predictor = dspy.Predict(GradeRubricItem)

    def _grade_item(self, conversation: str, item: RubricItem) -> RubricItemGrade:
        import dspy

        error = ""
        transient = False
        for attempt in range(self.max_attempts):
            config = {"rollout_id": attempt, "temperature": 1.0} if attempt else {}
            try:
                with dspy.context(lm=self.grader_lm):
                    prediction = self.predictor(
                        conversation=conversation, rubric_item=render_rubric_item(item), config=config
                    )
            except FatalServiceError:  # a revoked or exhausted judge key: the run stops
                raise
            except Exception as exc:  # parse and LM errors: retry, then record
                error = describe_error(exc)
                transient = is_transient(exc)
                continue
            return RubricItemGrade(
                criterion=item.criterion,
                points=item.points,
                tags=item.tags,
                criteria_met=bool(prediction.criteria_met),
                explanation=str(prediction.explanation).strip(),
                attempts=attempt + 1,
            )
        return RubricItemGrade(
            criterion=item.criterion,
            points=item.points,
            tags=item.tags,
            criteria_met=None,
            error=error,
            attempts=self.max_attempts,
            transient=transient,
        )

    def grade(self, question: Question, response: str | None) -> RubricGrade:
        """Grade `response` (the model's reply to the conversation). No response: nothing met, no judge call."""
        if not question.rubric:
            raise ValueError(f"{question.id}: the question has no rubric")
        turns = list(question.conversation or [ChatTurn(role="user", content=question.text)])
        if response is None or not response.strip():
            grades = [
                RubricItemGrade(
                    criterion=item.criterion,
                    points=item.points,
                    tags=item.tags,
                    criteria_met=False,
                    explanation="no response",
                )
                for item in question.rubric
            ]
        else:
            conversation = render_conversation([*turns, ChatTurn(role="assistant", content=response)])
            grades = [self._grade_item(conversation, item) for item in question.rubric]
        failed = sum(grade.criteria_met is None for grade in grades)
        met = [bool(grade.criteria_met) for grade in grades]
        example_tags = question.metadata.get("example_tags")
        return RubricGrade(
            question_id=question.id,
            items=grades,
            score=None if failed else rubric_score(question.rubric, met),
            tag_scores={} if failed else _tag_scores(question.rubric, met),
            example_tags=list(example_tags) if isinstance(example_tags, list) else [],
            n_failed_items=failed,
            n_transient_items=sum(grade.criteria_met is None and grade.transient for grade in grades),
        )


class RubricSummary(BaseModel):
    """HealthBench aggregate: clipped mean score, its bootstrap std, and the same per tag."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n: int
    n_scored: int
    n_failed: int
    score: float | None
    bootstrap_std: float | None
    tag_scores: dict[str, float]
    seed: int
    n_resamples: int


def _clipped_mean(values: Sequence[float]) -> float:
    return float(np.clip(np.mean(values), 0.0, 1.0))


def healthbench_summary(grades: Sequence[RubricGrade], *, n_resamples: int = 1000, seed: int = 0) -> RubricSummary:
    """`overall = clip(mean(example scores), 0, 1)`; examples with `score=None` are counted, not averaged."""
    scored = [grade for grade in grades if grade.score is not None]
    values = [grade.score for grade in scored if grade.score is not None]
    by_tag: dict[str, list[float]] = defaultdict(list)
    for grade in scored:
        assert grade.score is not None
        for tag in grade.example_tags:
            by_tag[tag].append(grade.score)
        for tag, value in grade.tag_scores.items():
            by_tag[tag].append(value)
    std: float | None = None
    if values:
        rng = np.random.default_rng(seed)
        data = np.asarray(values, dtype=float)
        samples = data[rng.integers(0, len(data), size=(n_resamples, len(data)))]
        std = float(np.std(np.clip(samples.mean(axis=1), 0.0, 1.0)))
    return RubricSummary(
        n=len(grades),
        n_scored=len(scored),
        n_failed=len(grades) - len(scored),
        score=_clipped_mean(values) if values else None,
        bootstrap_std=std,
        tag_scores={tag: _clipped_mean(v) for tag, v in sorted(by_tag.items())},
        seed=seed,
        n_resamples=n_resamples,
    )
