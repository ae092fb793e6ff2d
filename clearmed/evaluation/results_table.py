"""A run folder as a table, one row per question: what `clearmed.results_frame` returns and `clearmed export` writes.

The rows are the run's records (results.jsonl) in the manifest's order: what each pathway answered, the route and
the rule that decided, the answer against the gold, the status, whether a stage failed after its retries, and the
cost in dollars, seconds, LM calls and tokens. `correct` follows the summary's rule (`clearmed.evaluation.summary`):
a degraded answer counts wrong, and a question with no score (free text with no judge, a rubric grade) has none, so
the mean of the column over its scored rows is the run's headline accuracy. pandas is imported only to build a frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from clearmed.evaluation.compare import snapshot_prices
from clearmed.evaluation.spend import record_usd
from clearmed.evaluation.store import MANIFEST, EvalRecord, load_manifest, read_records
from clearmed.signatures.records import Answer

if TYPE_CHECKING:
    import pandas as pd


class ResultRow(BaseModel):
    """One question of a run. Answers are shown as `Answer.display()` gives them: "A", "A,C", or the text."""

    model_config = ConfigDict(extra="forbid")

    benchmark: str
    program: str
    index: int
    question_id: str
    answer_mode: str
    status: str
    answer: str | None
    gold: str | None
    correct: bool | None
    degraded: bool
    degraded_stages: str  # the stages that failed after their retries, comma-separated ("" when none)
    route: str | None
    deciding_rule: str | None
    confidence: str
    parametric_answer: str | None
    local_answer: str | None
    dynamic_answer: str | None
    followup_rounds: int
    rubric_score: float | None
    cost_usd: float | None  # None: some call's price is unknown (never counted as free)
    seconds: float
    lm_calls: int
    prompt_tokens: int
    completion_tokens: int
    error: str | None


COLUMNS: tuple[str, ...] = tuple(ResultRow.model_fields)


def _shown(answer: Answer | None) -> str | None:
    return answer.display() if answer is not None else None


def _row(record: EvalRecord, benchmark: str, cost_usd: float | None) -> ResultRow:
    decision, score = record.decision, record.score
    question = decision.bundle.question
    answered = {candidate.pathway: _shown(candidate.answer) for candidate in decision.bundle.candidates}
    lm_rows = [row for row in decision.usage if row.role != "tool"]
    return ResultRow(
        benchmark=benchmark,
        program=record.program,
        index=record.index,
        question_id=record.question_id,
        answer_mode=question.answer_mode,
        status=decision.status,
        answer=_shown(decision.answer),
        gold=",".join(question.gold_letters) if question.gold_letters else question.gold_text,
        correct=record.counted_correct,
        degraded=record.degraded,
        degraded_stages=",".join(record.degraded_stages),
        route=decision.route,
        deciding_rule=decision.deciding_rule or None,
        confidence=decision.confidence,
        parametric_answer=answered.get("parametric"),
        local_answer=answered.get("local"),
        dynamic_answer=answered.get("dynamic"),
        followup_rounds=len(decision.bundle.followups),
        rubric_score=score.rubric_grade.score if score is not None and score.rubric_grade is not None else None,
        cost_usd=cost_usd,
        seconds=record.seconds,
        lm_calls=decision.lm_calls(),
        prompt_tokens=sum(row.prompt_tokens for row in lm_rows),
        completion_tokens=sum(row.completion_tokens for row in lm_rows),
        error=decision.error,
    )


def result_rows(run_dir: Path) -> list[ResultRow]:
    """The rows of a run folder, in the manifest's order; a folder that is no run is one line (`RunStoreError`)."""
    manifest = load_manifest(run_dir / MANIFEST)
    prices = snapshot_prices(run_dir)  # prices a record written before records carried dollars
    records: Sequence[EvalRecord] = sorted(read_records(run_dir), key=lambda record: record.index)
    return [_row(record, manifest.benchmark, record_usd(record, prices)) for record in records]


def results_frame(run_dir: str | Path) -> pd.DataFrame:
    """A pandas DataFrame of a run folder, one row per finished question (columns: `ResultRow`'s fields)."""
    import pandas as pd

    rows = result_rows(Path(run_dir))
    return pd.DataFrame([row.model_dump() for row in rows], columns=list(COLUMNS))
