"""Degraded questions count: wrong in the headline accuracy, the clean figure beside it, alike in summary, report and
compare; `--common` compares on the questions clean in every run (issue 31, item 1)."""

from __future__ import annotations

from pathlib import Path

from clearmed.config import parse_config
from clearmed.evaluation import EvalSpec, RunStore, read_records, run_evaluation, summarize
from clearmed.numbers.compare import load_runs, paired_comparisons
from clearmed.report.html_report import load_run_views
from clearmed.report.markdown import comparison_table
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import QUESTION, build_toy_program, label_all, pathway_replies, verifier_reply

CONFIG = parse_config(
    {"backbones": {"main": {"kind": "openai_compatible", "model": "m", "api_base": "http://127.0.0.1:9/v1"}}},
    source="test.toml",
)
LONG = {"q1", "q3"}  # the two long questions: the program answers A, the gold is B


def _run(run_dir: Path, degraded: set[str]) -> None:
    """A finished toy run answering A to six questions, four right; `degraded` ids had their verifier overflow."""
    questions = [
        QUESTION.model_copy(update={"id": f"q{i}", "gold_letters": ["B" if f"q{i}" in LONG else "A"]}) for i in range(6)
    ]
    built, _, _ = build_toy_program(
        {
            **pathway_replies("A", "A", "A"),
            "source_quality": label_all("high"),
            "verifier": verifier_reply("consensus"),
        },
        settings=ProgramSettings(json_fallback=False, parallel_pathways="off"),
    )
    spec = EvalSpec(program="clear", benchmark="toy", source="memory", questions=questions, run_dir=run_dir)
    run_evaluation(spec, CONFIG, built, show_progress=False)
    records = [
        r.model_copy(update={"degraded_stages": ["verifier"]}) if r.question_id in degraded else r
        for r in read_records(run_dir)
    ]
    (run_dir / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    with RunStore(run_dir) as store:
        manifest = store.read_manifest()
        assert manifest is not None
        store.write_json("summary.json", summarize(records, manifest).model_dump_json())


def test_identical_answers_report_the_same_accuracy_however_many_stages_failed(tmp_path: Path) -> None:
    _run(tmp_path / "direct", set())
    _run(tmp_path / "clear", LONG)
    direct, clear = load_runs([tmp_path / "direct", tmp_path / "clear"])
    assert direct.summary.accuracy is not None
    assert clear.summary.accuracy is not None
    assert clear.summary.clean_accuracy is not None
    # Before: 100% against 66.7%, CLEAR's two failures on the hardest questions left out of its accuracy.
    assert direct.summary.accuracy.accuracy == clear.summary.accuracy.accuracy == 4 / 6
    assert clear.summary.accuracy.counted_wrong == 2
    assert (clear.summary.clean_accuracy.n, clear.summary.clean_accuracy.accuracy) == (4, 1.0)
    table = comparison_table([direct.summary, clear.summary])
    assert table.count("| 6/6 | 66.7 [") == 2
    assert "| 100.0 (4) |" in table
    # The paired table counts a degraded question wrong, as accuracy does: no question gained or lost.
    (pair,) = paired_comparisons([direct, clear])
    assert (pair.common, pair.gained, pair.lost) == (6, 0, 0)
    # The HTML report's summary agrees.
    views = load_run_views([tmp_path / "direct", tmp_path / "clear"])
    assert [v.summary.accuracy.accuracy for v in views if v.summary.accuracy] == [4 / 6, 4 / 6]


def test_common_compares_on_the_questions_clean_in_every_run(tmp_path: Path) -> None:
    _run(tmp_path / "direct", {"q0"})
    _run(tmp_path / "clear", LONG)
    direct, clear = load_runs([tmp_path / "direct", tmp_path / "clear"], common=True)
    assert direct.summary.evaluated == clear.summary.evaluated == 3  # q2, q4, q5
    assert set(direct.correct) == set(clear.correct) == {"q2", "q4", "q5"}
    assert direct.summary.degraded == clear.summary.degraded == 0
    assert direct.summary.accuracy is not None
    assert clear.summary.accuracy is not None
    assert direct.summary.accuracy.accuracy == clear.summary.accuracy.accuracy == 1.0


def test_a_degraded_rubric_question_meets_no_item(tmp_path: Path) -> None:
    from clearmed.metrics import QuestionScore, RubricGrade

    _run(tmp_path / "run", {"q1"})
    records = []
    for r in list(read_records(tmp_path / "run"))[:2]:
        grade = RubricGrade(
            question_id=r.question_id,
            items=[],
            score=1.0,
            tag_scores={"axis:accuracy": 1.0},
            example_tags=[],
            n_failed_items=0,
        )
        score = QuestionScore(
            question_id=r.question_id, answer_mode="free_text", status="answered", correct=False, in_gold_set=False,
            verdict="rubric", rubric_grade=grade,
        )  # fmt: skip
        records.append(r.model_copy(update={"score": score}))
    with RunStore(tmp_path / "run") as store:
        manifest = store.read_manifest()
    assert manifest is not None
    summary = summarize(records, manifest)
    assert summary.rubric is not None
    # Before: the degraded q1 was left out, and the rubric score was q0's alone, 1.0.
    assert (summary.rubric.n, summary.rubric.score) == (2, 0.5)
