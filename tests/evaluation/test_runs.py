"""Run folders: resume after an interruption with nothing lost or duplicated, locks, summaries, compare."""

from __future__ import annotations

import base64
import json
import warnings
from pathlib import Path

import pytest

from clearmed.config import parse_config
from clearmed.evaluation import EvalSpec, RunStore, RunStoreError, read_records, run_evaluation, summarize
from clearmed.evaluation.store import RUN_SCHEMA_VERSION, UnreadableResultWarning, UnwritableRecordError, scan_results
from clearmed.numbers.compare import load_runs
from clearmed.report.markdown import comparison_table, details_markdown
from clearmed.report.plots import run_plots, write_plots
from clearmed.signatures.records import Question
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import QUESTION, build_toy_program, label_all, pathway_replies, verifier_reply

CONFIG = parse_config(
    {"backbones": {"main": {"kind": "openai_compatible", "model": "m", "api_base": "http://127.0.0.1:9/v1"}}},
    source="test.toml",
)


def questions(n: int = 6) -> list[Question]:
    # Alternate the gold so that the scripted program (always "A") is right on half of them.
    return [QUESTION.model_copy(update={"id": f"q{i}", "gold_letters": ["A" if i % 2 == 0 else "B"]}) for i in range(n)]


def program():
    built, _, _ = build_toy_program(
        {
            **pathway_replies("A", "A", "A"),
            "source_quality": label_all("high"),
            "verifier": verifier_reply("consensus"),
        },
        settings=ProgramSettings(json_fallback=False, parallel_pathways="off"),
    )
    return built


def spec(run_dir: Path, n: int = 6, name: str = "clear") -> EvalSpec:
    return EvalSpec(program=name, benchmark="toy", source="memory", questions=questions(n), run_dir=run_dir)


def test_a_run_scores_every_question(tmp_path: Path) -> None:
    records = run_evaluation(spec(tmp_path / "run"), CONFIG, program(), show_progress=False)
    assert [r.question_id for r in records] == [f"q{i}" for i in range(6)]
    manifest = RunStore(tmp_path / "run").read_manifest()
    assert manifest is not None
    summary = summarize(records, manifest)
    assert summary.accuracy is not None
    assert (summary.accuracy.correct, summary.accuracy.n) == (3, 6)
    assert summary.route_counts == {"consensus": 6}
    assert summary.cost.mean_lm_calls == 5
    assert (tmp_path / "run" / "config.json").is_file()


def test_resume_after_interruption_recomputes_nothing_and_loses_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_evaluation(spec(run_dir), CONFIG, program(), show_progress=False, stop_after=2)
    assert len(list(read_records(run_dir))) == 2
    first_lines = (run_dir / "results.jsonl").read_text().splitlines()
    # A kill mid-write leaves a torn line: it is cut off and that question is redone.
    with (run_dir / "results.jsonl").open("a") as handle:
        handle.write('{"question_id": "q2", "index": 2, "decis')
    resumed = build_toy_program(
        {**pathway_replies("A", "A", "A"), "source_quality": label_all("high"), "verifier": verifier_reply("consensus")}
    )
    program_again, engine, _ = resumed
    records = run_evaluation(spec(run_dir), CONFIG, program_again, show_progress=False)
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    assert lines[:2] == first_lines  # finished questions untouched
    assert [r.question_id for r in records] == [f"q{i}" for i in range(6)]
    assert len(lines) == 6  # no duplicates
    assert len(engine.calls) == 4 * 5  # only the four unfinished questions ran


def _null_probability_line(line: str) -> str:
    """A finished record as the old code wrote a NaN probability: pydantic's JSON turns it into null."""
    record = json.loads(line)
    record["decision"]["bundle"]["candidates"][0]["option_scores"] = {"probs": {"A": None, "B": 0.5}, "letters": ["A"]}
    return json.dumps(record)


def test_a_damaged_middle_line_is_skipped_with_a_warning_and_redone_on_resume(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_evaluation(spec(run_dir), CONFIG, program(), show_progress=False, stop_after=3)
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    # line 1: not JSON at all; line 2: the NaN-as-null record that used to stop the whole run from being read
    (run_dir / "results.jsonl").write_text("\n".join(["{broken", _null_probability_line(lines[1]), lines[2]]) + "\n")
    with pytest.warns(UnreadableResultWarning) as caught:
        records = list(read_records(run_dir))
    assert [r.question_id for r in records] == ["q2"]
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2  # one warning per bad line, naming the file and the line
    assert "results.jsonl:1: damaged line" in messages[0]
    assert "results.jsonl:2: damaged line" in messages[1]
    assert "option_scores.probs.A" in messages[1]
    with pytest.warns(UnreadableResultWarning):
        assert [line.number for line in scan_results(run_dir).skipped] == [1, 2]
    # Their questions count as not done: a resume moves the lines aside (kept) and redoes those questions.
    program_again, engine, _ = build_toy_program(
        {**pathway_replies("A", "A", "A"), "source_quality": label_all("high"), "verifier": verifier_reply("consensus")}
    )
    resumed = run_evaluation(spec(run_dir), CONFIG, program_again, show_progress=False)
    assert [r.question_id for r in resumed] == [f"q{i}" for i in range(6)]
    assert len(engine.calls) == 5 * 5  # q0, q1 redone, q3-q5 new; q2 untouched
    assert (run_dir / "results.unreadable.jsonl").read_text().splitlines() == [
        "{broken",
        _null_probability_line(lines[1]),
    ]
    assert len((run_dir / "results.jsonl").read_text().splitlines()) == 6
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnreadableResultWarning)  # the results file is clean again
        assert len(list(read_records(run_dir))) == 6


def test_a_torn_last_line_is_the_same_skip(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_evaluation(spec(run_dir), CONFIG, program(), show_progress=False, stop_after=2)
    with (run_dir / "results.jsonl").open("a") as handle:
        handle.write('{"question_id": "q2", "index": 2, "decis')
    with pytest.warns(UnreadableResultWarning, match=r"results.jsonl:3: torn last line"):
        assert [r.question_id for r in read_records(run_dir)] == ["q0", "q1"]


def test_a_record_that_would_not_load_back_is_recorded_as_failed_and_the_run_goes_on(tmp_path: Path) -> None:
    from rich.console import Console

    from clearmed.signatures.records import OptionScores

    healthy = program()

    def with_nan(question: Question):  # a NaN probability slipped in past validation (model_construct/model_copy)
        prediction = healthy(question=question)
        if question.id != "q1":
            return prediction
        decision = prediction.decision
        nan = OptionScores.model_construct(probs={"A": float("nan"), "B": 0.5}, letters=("A",), per_option=False)
        candidates = [c.model_copy(update={"option_scores": nan}) for c in decision.bundle.candidates]
        bundle = decision.bundle.model_copy(update={"candidates": candidates})
        prediction.decision = decision.model_copy(update={"bundle": bundle})
        return prediction

    run_dir = tmp_path / "run"
    console = Console(record=True, width=400)
    records = run_evaluation(spec(run_dir), CONFIG, with_nan, console=console, show_progress=False)  # type: ignore[arg-type]
    assert [r.question_id for r in records] == [f"q{i}" for i in range(6)]  # the run went on
    failed = records[1]
    assert failed.decision.status == "failed"  # in place of the record that would not load, saying why
    assert failed.decision.error is not None
    assert "would not load back" in failed.decision.error
    out = console.export_text()
    assert "q1: its record would not load back" in out
    assert "recorded as failed" in out
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnreadableResultWarning)  # nothing unreadable reached the file
        assert len(list(read_records(run_dir))) == 6
    with pytest.raises(UnwritableRecordError, match="option_scores"):
        RunStore(run_dir).append(records[0].model_copy(update={"decision": with_nan(questions()[1]).decision}))
    # An optional probability would come back as None from JSON, silently: the Python round trip refuses it.
    decision = records[0].decision
    candidate = decision.bundle.candidates[0].model_copy(
        update={
            "option_scores": OptionScores.model_construct(probs={"A": 1.0}, letters=("A",), letter_mass=float("nan"))
        }
    )
    quiet_nan = decision.model_copy(update={"bundle": decision.bundle.model_copy(update={"candidates": [candidate]})})
    with pytest.raises(UnwritableRecordError, match="letter_mass"):
        RunStore(run_dir).append(records[0].model_copy(update={"decision": quiet_nan}))
    # The failed question is done: a resume does not meet it again.
    resumed = run_evaluation(spec(run_dir), CONFIG, program(), show_progress=False)
    assert [r.question_id for r in resumed] == [f"q{i}" for i in range(6)]
    assert resumed[1].decision.status == "failed"


def test_probabilities_in_records_refuse_nan_and_infinity() -> None:
    from pydantic import ValidationError

    from clearmed.signatures.records import OptionScores, VerifierOutput

    for bad in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(ValidationError):
            OptionScores(probs={"A": bad, "B": 0.5}, letters=("A",))
        with pytest.raises(ValidationError):
            OptionScores(probs={"A": 0.5, "B": 0.5}, letters=("A",), letter_mass=bad)
        with pytest.raises(ValidationError):
            VerifierOutput(route="consensus", pooled={"A": bad})


def test_a_second_writer_is_refused(tmp_path: Path) -> None:
    with RunStore(tmp_path / "run"), pytest.raises(RunStoreError, match="another clearmed eval"):
        run_evaluation(spec(tmp_path / "run"), CONFIG, program(), show_progress=False)


def test_a_different_run_in_the_same_folder_is_refused(tmp_path: Path) -> None:
    run_evaluation(spec(tmp_path / "run"), CONFIG, program(), show_progress=False, stop_after=1)
    with pytest.raises(RunStoreError, match="different run"):
        run_evaluation(spec(tmp_path / "run", name="direct"), CONFIG, program(), show_progress=False)


def test_a_run_recorded_before_a_setting_existed_resumes_while_that_setting_is_at_its_default(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_evaluation(spec(run_dir), CONFIG, program(), show_progress=False, stop_after=2)
    # what an older clearmed wrote: the snapshot and digest of a schema without `format_gate_lm`
    snapshot = json.loads((run_dir / "config.json").read_text())
    del snapshot["program"]["format_gate_lm"]
    (run_dir / "config.json").write_text(json.dumps(snapshot))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["config_digest"] = "0123456789abcdef"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    records = run_evaluation(spec(run_dir), CONFIG, program(), show_progress=False)
    assert len(records) == 6
    # a setting that does differ is still a different run
    changed = CONFIG.model_copy(update={"program": CONFIG.program.model_copy(update={"format_gate_lm": False})})
    with pytest.raises(RunStoreError, match="different run"):
        run_evaluation(spec(run_dir), changed, program(), show_progress=False)


def test_a_run_recorded_with_a_removed_setting_resumes(tmp_path: Path) -> None:
    # [corpus] k and [search] max_results decided nothing and were removed (issue 49); runs before wrote them.
    tables = {"corpus": {"preset": "openstax"}, "search": {"backend": "offline"}}
    main = {"kind": "openai_compatible", "model": "m", "api_base": "http://127.0.0.1:9/v1"}
    config = parse_config({"backbones": {"main": main}, **tables}, source="test.toml")
    run_dir = tmp_path / "run"
    run_evaluation(spec(run_dir), config, program(), show_progress=False, stop_after=2)
    snapshot = json.loads((run_dir / "config.json").read_text())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["config_digest"] = "0123456789abcdef"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))

    def older(corpus: dict[str, object]) -> None:
        written = {
            **snapshot,
            "corpus": {**snapshot["corpus"], **corpus},
            "search": {**snapshot["search"], "max_results": 8},
        }
        (run_dir / "config.json").write_text(json.dumps(written))

    older({"limit": 100})  # a corpus setting that does count: a different run
    with pytest.raises(RunStoreError, match="different run"):
        run_evaluation(spec(run_dir), config, program(), show_progress=False)
    older({"k": 5})
    assert len(run_evaluation(spec(run_dir), config, program(), show_progress=False)) == 6


def test_a_program_that_raises_is_recorded_as_failed(tmp_path: Path) -> None:
    class Exploding:
        def __call__(self, question: Question):
            raise RuntimeError("boom")

    records = run_evaluation(spec(tmp_path / "run", n=2), CONFIG, Exploding(), show_progress=False)  # type: ignore[arg-type]
    assert [r.decision.status for r in records] == ["failed", "failed"]
    assert records[0].score is not None
    assert not records[0].score.correct
    assert "boom" in (records[0].decision.error or "")


def test_threads_give_the_same_results(tmp_path: Path) -> None:
    sequential = run_evaluation(spec(tmp_path / "a"), CONFIG, program(), show_progress=False)
    threaded = run_evaluation(spec(tmp_path / "b"), CONFIG, program(), show_progress=False, num_threads=3)
    assert [r.score for r in sequential] == [r.score for r in threaded]


def test_comparison_table_and_plots(tmp_path: Path) -> None:
    records = run_evaluation(spec(tmp_path / "run"), CONFIG, program(), show_progress=False)
    manifest = RunStore(tmp_path / "run").read_manifest()
    assert manifest is not None
    summary = summarize(records, manifest)
    table = comparison_table([summary, summary])
    assert table.count("| clear | toy | 6/6 | 50.0 [") == 2
    cached = summary.model_copy(update={"cost": summary.cost.model_copy(update={"cache_hit_calls": 12})})
    assert "| 5.0 (+2.0 cached) |" in comparison_table([cached])  # reused calls are shown, not hidden
    paths = write_plots([summary], tmp_path / "plots")
    assert [p.name for p in paths] == ["accuracy.png", "routes.png", "cost_by_route.png"]
    assert all(p.stat().st_size > 1000 for p in paths)
    json.loads(summary.model_dump_json())
    # One renderer: the HTML report inlines the very PNGs of the run folder (its label is the program's name here).
    inlined = run_plots([summary], ["clear"])
    for path in paths:
        assert base64.b64decode(inlined[path.stem].removeprefix("data:image/png;base64,")) == path.read_bytes()
    assert {"rules", "pathways"} <= set(inlined) - {p.stem for p in paths}  # and draws its own two beside them


def _finished_run(run_dir: Path, n: int, name: str) -> None:
    records = run_evaluation(spec(run_dir, n=n, name=name), CONFIG, program(), show_progress=False)
    with RunStore(run_dir) as store:
        manifest = store.read_manifest()
        assert manifest is not None
        store.write_json("summary.json", summarize(records, manifest).model_dump_json())


def test_compare_on_common_ids_resummarizes_on_the_shared_questions(tmp_path: Path) -> None:
    from clearmed.numbers.compare import load_runs, paired_comparisons
    from clearmed.report.markdown import paired_markdown

    _finished_run(tmp_path / "a" / "clear-n6", 6, "clear")
    _finished_run(tmp_path / "b" / "clear-n6", 6, "clear")
    _finished_run(tmp_path / "small", 4, "clear")
    folders = [tmp_path / "a" / "clear-n6", tmp_path / "small", tmp_path / "b" / "clear-n6"]
    as_run = load_runs(folders)
    assert [r.summary.evaluated for r in as_run] == [6, 4, 6]
    assert [r.label for r in as_run] == ["a/clear-n6", "small", "b/clear-n6"]  # same folder names are qualified
    shared = load_runs(folders, common=True)
    assert [(r.summary.evaluated, r.summary.planned) for r in shared] == [(4, 4)] * 3
    pairs = paired_comparisons(shared)
    assert [(p.baseline, p.other, p.common, p.gained, p.lost) for p in pairs] == [
        ("a/clear-n6", "small", 4, 0, 0),
        ("a/clear-n6", "b/clear-n6", 4, 0, 0),
    ]
    # No question gained or lost: +0 points with Newcombe's interval, p 1.00 (and Holm's, over the two pairs)
    assert "| small | a/clear-n6 | 4 | 2 | 0 | 0 | 2 | +0.0 [-35.0, +35.0] | 1.00 | 1.00 |" in paired_markdown(pairs)
    details = details_markdown([r.summary for r in shared], labels=[r.label for r in shared])
    assert "### Pathways: small on toy" in details  # runs of one program are told apart by label


def test_compare_refuses_runs_without_shared_questions(tmp_path: Path) -> None:
    from clearmed.numbers.compare import load_runs

    _finished_run(tmp_path / "a", 2, "clear")
    records = [r.model_copy(update={"question_id": "other-" + r.question_id}) for r in read_records(tmp_path / "a")]
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "manifest.json").write_text((tmp_path / "a" / "manifest.json").read_text())
    (tmp_path / "b" / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    with pytest.raises(RunStoreError, match="share no question ids"):
        load_runs([tmp_path / "a", tmp_path / "b"], common=True)
    with pytest.raises(RunStoreError, match=r"no summary\.json"):
        load_runs([tmp_path / "b"])


def test_the_summary_counts_calibrated_fallbacks(tmp_path: Path) -> None:
    from clearmed.programs.adjudication.calibrated import CalibratedFallbackWarning
    from clearmed.testing import SCORED_CALIBRATED

    script = {**pathway_replies("A", "A", "A"), "source_quality": label_all("high")}
    # Generated letters (no log-probabilities): nothing to pool, so every question falls back.
    generating = SCORED_CALIBRATED.model_copy(update={"mcq_decoding": "generate"})
    fell_back, _, _ = build_toy_program(script, settings=generating)
    with pytest.warns(CalibratedFallbackWarning):
        records = run_evaluation(spec(tmp_path / "generated"), CONFIG, fell_back, show_progress=False)
    manifest = RunStore(tmp_path / "generated").read_manifest()
    assert manifest is not None
    summary = summarize(records, manifest)
    assert (summary.calibrated_questions, summary.calibrated_fallbacks) == (6, {"nothing_to_pool": 6})
    text = details_markdown([summary])
    assert "calibrated verifier fell back to the deterministic (heuristic) verifier: 6 of 6 questions" in text
    assert json.loads(summary.model_dump_json())["calibrated_fallbacks"] == {"nothing_to_pool": 6}
    # Scored pathways: the calibrated verifier decides every question, and the summary says it never fell back.
    scores = {
        stage: {"A": 0.7, "B": 0.1, "C": 0.1, "D": 0.1} for stage in ("parametric", "local_answer", "dynamic_answer")
    }
    scored, _, _ = build_toy_program(script, settings=SCORED_CALIBRATED, scores=scores)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibratedFallbackWarning)
        records = run_evaluation(spec(tmp_path / "scored"), CONFIG, scored, show_progress=False)
    summary = summarize(records, manifest)
    assert (summary.calibrated_questions, summary.calibrated_fallbacks) == (6, {})
    assert "fell back to the deterministic (heuristic) verifier: 0 of 6 questions" in details_markdown([summary])
    # Another verifier mode: no calibrated section at all.
    plain = summarize(run_evaluation(spec(tmp_path / "lm"), CONFIG, program(), show_progress=False), manifest)
    assert plain.calibrated_questions == 0
    assert "Calibrated verifier" not in details_markdown([plain])


@pytest.mark.parametrize(
    ("version", "reader"), [(None, "read it with clearmed 0.1.0"), (1, "clearmed 0.1.0"), (3, "a newer clearmed")]
)
def test_a_run_of_another_schema_is_refused_in_one_line_naming_what_reads_it(
    tmp_path: Path, version: int | None, reader: str
) -> None:
    # Runs of clearmed 0.1.0 carry no schema_version and may hold settings issue 26 removed: none is misread.
    run_dir = tmp_path / "run"
    run_evaluation(spec(run_dir), CONFIG, program(), show_progress=False, stop_after=2)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["schema_version"] == RUN_SCHEMA_VERSION
    if version is None:
        del manifest["schema_version"]
    else:
        manifest["schema_version"] = version
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    for reading in (
        lambda: run_evaluation(spec(run_dir), CONFIG, program(), show_progress=False),  # resume
        lambda: list(read_records(run_dir)),  # report, compare, replay, export-sft
        lambda: load_runs([run_dir]),
    ):
        with pytest.raises(RunStoreError) as refused:
            reading()
        assert f"is a run of schema {version or 1}, which this clearmed reads no more" in str(refused.value)
        assert reader in str(refused.value)
        assert "\n" not in str(refused.value)
