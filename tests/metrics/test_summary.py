from __future__ import annotations

import pytest

from clearmed.metrics import QuestionScore, accuracy_summary, wilson_interval


def _score(qid: str, correct: bool, **extra: object) -> QuestionScore:
    fields: dict[str, object] = {"in_gold_set": correct, "answer_mode": "single", "status": "answered"}
    fields.update(extra)
    return QuestionScore(question_id=qid, correct=correct, **fields)  # type: ignore[arg-type]


def test_summary_counts_everything() -> None:
    scores = [
        _score("1", True),
        _score("2", True),
        _score("3", False),
        _score("4", False, status="unparsed", unparsed=True),
        _score("5", False, status="failed", failed=True),
        _score("6", True, answer_mode="multi", multi=True),
        _score("7", False, answer_mode="multi", multi=True, in_gold_set=True),
        _score("8", False, answer_mode="multi", multi=True),
    ]
    summary = accuracy_summary(scores, seed=5)
    assert (summary.n, summary.correct, summary.accuracy) == (8, 3, 3 / 8)
    assert (summary.unparsed, summary.failed) == (1, 1)
    assert summary.in_gold_set == 4
    assert summary.in_gold_set_accuracy == 0.5
    assert (summary.n_multi, summary.multi_exact_correct, summary.multi_in_gold_set) == (3, 1, 2)
    assert summary.wilson == wilson_interval(3, 8)
    assert summary.bootstrap is not None
    assert summary.bootstrap.contains(3 / 8)
    assert summary.seed == 5
    assert accuracy_summary(scores, seed=5) == summary


def test_judge_verdict_counts() -> None:
    scores = [
        _score("1", True, answer_mode="free_text", verdict="correct"),
        _score("2", False, answer_mode="free_text", verdict="partially_correct"),
        _score("3", False, answer_mode="free_text", judge_error="AdapterParseError: x"),
    ]
    summary = accuracy_summary(scores)
    assert (summary.correct, summary.partially_correct, summary.judge_failed) == (1, 1, 1)


def test_empty_summary_and_duplicates() -> None:
    empty = accuracy_summary([])
    assert empty.n == 0
    assert empty.accuracy is None
    assert empty.wilson is None
    assert empty.bootstrap is None
    with pytest.raises(ValueError, match="scored twice"):
        accuracy_summary([_score("1", True), _score("1", False)])
