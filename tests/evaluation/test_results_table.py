"""`results_frame`: one row per question of a run folder, with the figures the summary counts; `runs_frame`: one row
per run. Every row names its run (folder, models, config, seed, shard), and both take a suite's folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from clearmed import results_frame, runs_frame
from clearmed.backbones.config import BACKBONE_ROLES
from clearmed.evaluation import RunStore, RunStoreError, read_records, summarize
from clearmed.evaluation.store import MANIFEST, RESULTS, load_manifest
from clearmed.numbers.results_table import COLUMNS, ROLE_COLUMNS, RUN_COLUMNS, RunLabel
from clearmed.signatures.records import Answer, Question
from clearmed.testing.synthetic_run import write_synthetic_run, write_synthetic_suite


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


def test_a_folder_with_no_run_in_or_below_it_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "plots").mkdir()
    with pytest.raises(
        RunStoreError, match=r"no manifest\.json in it or below it \(is it a run folder, or a suite's\?\)"
    ):
        results_frame(tmp_path)
    with pytest.raises(RunStoreError, match=r"/absent: no such folder$"):
        runs_frame(tmp_path / "absent")
    with pytest.raises(RunStoreError, match=r"give at least one run folder"):
        runs_frame([])


def test_a_run_given_twice_is_refused_rather_than_counted_twice(synthetic: Path) -> None:
    with pytest.raises(RunStoreError, match=r"run folder given twice: "):
        results_frame([synthetic, str(synthetic)])
    with pytest.raises(RunStoreError, match=r"run folder given twice: "):
        runs_frame([synthetic.parent, synthetic])  # the folder holding it finds it again


# ------------------------------------------------------------------------------------------------ rows that name the run


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    """A suite's folder: model-a's run in two shards and their merge, model-b's run (another seed) in one process."""
    out = tmp_path_factory.mktemp("suite")
    return out, write_synthetic_suite(out, n=8)


def _accuracy(run_dir: Path) -> float:
    summary = summarize(sorted(read_records(run_dir), key=lambda r: r.index), load_manifest(run_dir / MANIFEST))
    assert summary.accuracy is not None
    assert summary.accuracy.accuracy is not None
    return summary.accuracy.accuracy


def test_two_models_concatenated_and_grouped_by_model_give_each_models_accuracy(
    suite: tuple[Path, dict[str, Path]],
) -> None:
    _, runs = suite
    frame = pd.concat([results_frame(runs["model-a"]), results_frame(str(runs["model-b"]))], ignore_index=True)
    by_model = frame.groupby("model").correct.mean().to_dict()
    expected = {"model-a": _accuracy(runs["model-a"]), "model-b": _accuracy(runs["model-b"])}
    assert by_model == pytest.approx(expected)
    assert expected["model-a"] != expected["model-b"]  # grouped by program alone, the two runs would be one number
    assert frame.groupby("program").ngroups == 1
    pd.testing.assert_frame_equal(results_frame([runs["model-a"], runs["model-b"]]), frame)


def test_every_row_names_its_run_folder_models_config_seed_and_shard(suite: tuple[Path, dict[str, Path]]) -> None:
    _, runs = suite
    shard = runs["model-a"].with_name(runs["model-a"].name + "-shard2of2")
    frame = results_frame([runs["model-a"], shard])
    assert list(frame.columns[:17]) == [
        "run",
        "program",
        "benchmark",
        "model",
        "config_model",
        "assessor_model",
        "judge_model",
        "teacher_model",
        "prompt_model",
        "config",
        "config_digest",
        "overrides",
        "revision",
        "seed",
        "shard",
        "recorded_pathways",
        "artifact",
    ]
    merged = frame[frame.run == str(runs["model-a"])]
    assert len(merged) == 8
    assert len(frame) == 12
    manifest = load_manifest(runs["model-a"] / MANIFEST)
    label = merged.iloc[0]
    assert (label.program, label.benchmark, label.config, label.seed) == ("clear", "synthetic", "synthetic", 0)
    assert label.config_digest == manifest.config_digest
    # No [backbones.assessor]: the main model assesses; no judge, teacher or prompt model table: none.
    assert (label.model, label.config_model, label.assessor_model) == ("model-a", "model-a", "model-a")
    assert [label.judge_model, label.teacher_model, label.prompt_model, label.revision, label.overrides] == [None] * 5
    assert merged.shard.isna().all()  # the merge is the whole run
    assert set(frame[frame.run == str(shard)].shard) == {"2/2"}


def test_the_models_are_the_config_snapshots_each_role(synthetic: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(synthetic, run_dir)
    snapshot = json.loads((run_dir / "config.json").read_text())
    main = snapshot["backbones"]["main"]
    snapshot["backbones"] |= {"assessor": {**main, "model": "small"}, "judge": {**main, "model": "grader"}}
    (run_dir / "config.json").write_text(json.dumps(snapshot))
    row = results_frame(run_dir).iloc[0]
    assert (row.model, row.assessor_model, row.judge_model, row.teacher_model) == ("scripted", "small", "grader", None)
    (run_dir / "config.json").unlink()  # a folder without its snapshot: the models are unknown, not guessed
    row = results_frame(run_dir).iloc[0]
    assert (row.model, row.assessor_model, row.config) == (None, None, "synthetic")


def test_a_run_that_adjudicated_recorded_pathways_names_them(synthetic: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(synthetic, run_dir)
    manifest = json.loads((run_dir / MANIFEST).read_text())
    recorded = {"parametric": "mirage/medqa/cot/OpenAI/gpt-4-32k", "local": "mirage/medqa/rag_32/gpt-4-32k"}
    (run_dir / MANIFEST).write_text(json.dumps(manifest | {"recorded_pathways": recorded, "artifact": "compiled/x"}))
    row = runs_frame(run_dir).iloc[0]
    # The answers are gpt-4's though the config's model is another: the label says so.
    assert row.recorded_pathways == "local=mirage/medqa/rag_32/gpt-4-32k; parametric=mirage/medqa/cot/OpenAI/gpt-4-32k"
    assert row.artifact == "compiled/x"
    plain = results_frame(synthetic).iloc[0]
    assert (plain.recorded_pathways, plain.artifact) == (None, None)


def test_every_backbone_role_has_a_model_column() -> None:
    assert set(ROLE_COLUMNS) == set(BACKBONE_ROLES)
    assert set(ROLE_COLUMNS.values()) <= set(RunLabel.model_fields)


# ------------------------------------------------------------------------------------------------ one row per run


def test_a_suite_folder_gives_one_row_per_run_without_the_shards_of_a_merged_run(
    suite: tuple[Path, dict[str, Path]],
) -> None:
    out, runs = suite
    frame = runs_frame(str(out))
    assert list(frame.columns) == list(RUN_COLUMNS)
    assert frame.run.tolist() == [str(runs["model-a"]), str(runs["model-b"])]  # not the two shard folders
    assert frame.model.tolist() == ["model-a", "model-b"]
    assert frame.seed.tolist() == [0, 1]
    assert (frame.planned.tolist(), frame.n.tolist(), frame.degraded.tolist()) == ([8, 8], [8, 8], [0, 0])
    assert frame.accuracy.tolist() == pytest.approx([_accuracy(runs["model-a"]), _accuracy(runs["model-b"])])
    assert (frame.accuracy_low < frame.accuracy).all()
    assert (frame.accuracy < frame.accuracy_high).all()
    questions = results_frame(out)
    assert len(questions) == 16
    sums = questions.groupby("run")[["lm_calls", "prompt_tokens", "completion_tokens"]].sum()
    assert frame.set_index("run")[["lm_calls", "prompt_tokens", "completion_tokens"]].equals(sums)


def test_shards_not_yet_merged_are_each_a_run(suite: tuple[Path, dict[str, Path]], tmp_path: Path) -> None:
    out, runs = suite
    copy = tmp_path / "suite"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns(runs["model-a"].name))  # the merge not made yet
    frame = runs_frame(copy)
    assert frame.shard.fillna("whole").tolist() == ["1/2", "2/2", "whole"]
    assert frame.n.tolist() == [4, 4, 8]


def test_a_run_row_counts_a_degraded_right_answer_wrong(synthetic: Path, tmp_path: Path) -> None:
    records = sorted(read_records(synthetic), key=lambda record: record.index)
    right = [record for record in records if record.score is not None and record.score.correct][:2]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / MANIFEST).write_text((synthetic / MANIFEST).read_text())
    degraded = right[0].model_copy(update={"degraded_stages": ["local"]})
    (run_dir / RESULTS).write_text(degraded.model_dump_json() + "\n" + right[1].model_dump_json() + "\n")
    row = runs_frame(run_dir).iloc[0]
    assert (row.planned, row.n, row.scored, row.degraded) == (40, 2, 2, 1)
    assert (row.accuracy, row.clean_accuracy) == (0.5, 1.0)
