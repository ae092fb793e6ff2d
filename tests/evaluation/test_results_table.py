"""`results_frame`: one row per question of a run folder, with the figures the summary counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from clearmed import results_frame
from clearmed.evaluation import RunStore, RunStoreError, read_records, summarize
from clearmed.evaluation.results_table import COLUMNS
from clearmed.evaluation.store import RESULTS
from clearmed.signatures.records import Answer, Question
from clearmed.testing.synthetic_run import write_synthetic_run


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("table") / "run"
    write_synthetic_run(run_dir, n=40)
    return run_dir


def test_one_row_per_question_in_the_manifest_order_with_what_each_record_says(synthetic: Path) -> None:
    frame = results_frame(synthetic)
    records = sorted(read_records(synthetic), key=lambda record: record.index)
    assert list(frame.columns) == list(COLUMNS)
    assert list(frame.question_id) == [record.question_id for record in records]
    assert list(frame["index"]) == list(range(40))
    assert set(frame.benchmark) == {"synthetic"}
    first, row = records[0], frame.iloc[0]
    answers = {c.pathway: c.answer.display() for c in first.decision.bundle.candidates if c.answer is not None}
    assert (row.parametric_answer, row.local_answer, row.dynamic_answer) == tuple(
        answers.get(name) for name in ("parametric", "local", "dynamic")
    )
    assert (row.route, row.deciding_rule, row.status) == (
        first.decision.route,
        first.decision.deciding_rule,
        first.decision.status,
    )
    assert row.answer == (first.decision.answer.display() if first.decision.answer else None)
    assert row.gold == ",".join(first.decision.bundle.question.gold_letters or [])
    assert list(frame.lm_calls) == [record.decision.lm_calls() for record in records]
    assert list(frame.cost_usd) == [record.cost_usd for record in records]
    assert list(frame.seconds) == [record.seconds for record in records]
    assert frame.followup_rounds.sum() == sum(len(r.decision.bundle.followups) for r in records)
    assert len(set(frame.route)) > 1  # the synthetic questions take several routes


def test_the_correct_column_gives_the_summary_accuracy(synthetic: Path) -> None:
    frame = results_frame(synthetic)
    with RunStore(synthetic) as store:
        manifest = store.read_manifest()
    assert manifest is not None
    summary = summarize(sorted(read_records(synthetic), key=lambda r: r.index), manifest)
    assert summary.accuracy is not None
    assert frame.correct.mean() == pytest.approx(summary.accuracy.accuracy)
    assert summary.route_counts == frame.route.value_counts().to_dict()


def test_a_degraded_answer_counts_wrong_and_names_its_stages(synthetic: Path, tmp_path: Path) -> None:
    records = sorted(read_records(synthetic), key=lambda record: record.index)
    right = next(record for record in records if record.score is not None and record.score.correct)
    degraded = right.model_copy(update={"degraded_stages": ["local", "verifier"]})
    question = Question(id="free", text="What causes scurvy?", answer_mode="free_text", gold_text="vitamin C")
    decision = right.decision.model_copy(
        update={
            "question_id": "free",
            "answer": Answer.of_text("low vitamin C"),
            "bundle": right.decision.bundle.model_copy(update={"question": question}),
        }
    )
    free = right.model_copy(update={"question_id": "free", "index": 1, "decision": decision, "score": None})
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text((synthetic / "manifest.json").read_text())
    (run_dir / RESULTS).write_text(degraded.model_dump_json() + "\n" + free.model_dump_json() + "\n")
    frame = results_frame(run_dir)
    assert frame.correct.tolist() == [False, None]  # degraded: wrong, as in accuracy; free text unjudged: no score
    assert frame.degraded.tolist() == [True, False]
    assert frame.degraded_stages.tolist() == ["local,verifier", ""]
    assert frame.loc[1, ["answer_mode", "answer", "gold"]].tolist() == ["free_text", "low vitamin C", "vitamin C"]


def test_a_folder_that_is_no_run_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(RunStoreError, match=r"no manifest\.json \(is it a run folder\?\)"):
        results_frame(tmp_path)
