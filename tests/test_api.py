"""The Python API: the package face, `evaluate` writing the run folder `clearmed eval` writes, plain questions, and the
README's "Python API" example run as written (on a scripted LM in place of the embedded model)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import dspy
import pytest
from dspy import lm15

import clearmed
from clearmed.api import assemble
from clearmed.api.evaluate import question_of
from clearmed.backbones.client import ClearmedLM
from clearmed.cli.main import main
from clearmed.core.errors import FatalServiceError, UsageError
from clearmed.evaluation import BudgetReached, read_records
from clearmed.signatures.records import Question
from clearmed.testing import (
    AUDIT_ALL_TRUE,
    GUARD_ALL_TRUE,
    UNREACHABLE_BACKBONE,
    ScriptedCall,
    ScriptedEngine,
    demo_config_toml,
    label_all,
    scripted_lm,
    verifier_reply,
)

ROOT = Path(__file__).resolve().parent.parent


def answer(call: ScriptedCall) -> dict[str, object]:
    """B for the scurvy question, A for the other options, a text for free text; evidence answers cite nothing."""
    cited: dict[str, object] = {"cited_ids": []} if "evidence" in call.user else {}
    if "Vitamin C" in call.user:
        letter = "B"
    elif "A)" in call.user or "A:" in call.user or "A." in call.user:
        letter = "A"
    else:
        letter = "thiazide diuretics"
    return {"rationale": "because", **cited, "answer": letter}


SCRIPT: dict[str, Any] = {
    "parametric": answer,
    "local_answer": answer,
    "dynamic_answer": answer,
    "source_quality": label_all("high"),
    "followup_quality": label_all("high"),
    "verifier": verifier_reply("consensus"),
    "agreement": {"parametric_equals_local": True, "parametric_equals_dynamic": True, "local_equals_dynamic": True},
    "response": {"response": "Thiazide diuretics."},
    "format_gate": {"letters": "A"},
    "followup_query": {"query": "first-line hypertension drug"},
    "guard": GUARD_ALL_TRUE,
    "audit": AUDIT_ALL_TRUE,
}
# Scored options (the embedded config's mcq_decoding = "score"): the first option most likely.
SCORES = {stage: {"A": 0.6, "B": 0.3, "C": 0.1} for stage in ("parametric", "local_answer", "dynamic_answer")}


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every program built from a config answers from `SCRIPT` (no model is loaded, nothing leaves the machine)."""
    lm, _ = scripted_lm(SCRIPT, scores=SCORES)
    monkeypatch.setattr(assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm})


@pytest.fixture
def demo_config(tmp_path: Path) -> Path:
    path = tmp_path / "demo.toml"
    path.write_text(demo_config_toml(program="json_fallback = false"), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------ the package face


def test_import_clearmed_loads_only_the_version_until_a_name_is_used() -> None:
    probe = (
        "import sys, clearmed; print(sorted(m for m in sys.modules if m.startswith('clearmed')));"
        "clearmed.results_frame; print('clearmed.numbers.results_table' in sys.modules, 'dspy' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT.parent)
    assert done.returncode == 0, done.stderr
    loaded, used = done.stdout.splitlines()
    assert loaded == "['clearmed', 'clearmed.core', 'clearmed.core.version']"
    assert used == "True False"  # the table's module, and still no DSPy


def test_the_face_names_each_function_where_it_is_defined() -> None:
    from clearmed.api.assemble import build_program
    from clearmed.api.compare import compare_runs
    from clearmed.api.evaluate import estimate_run, evaluate
    from clearmed.api.request import EvalRequest
    from clearmed.api.suite import evaluate_suite, merge_shards
    from clearmed.config import load_config
    from clearmed.numbers.results_table import results_frame, runs_frame

    assert (clearmed.load_config, clearmed.build_program) == (load_config, build_program)
    assert (clearmed.evaluate, clearmed.results_frame) == (evaluate, results_frame)
    assert (clearmed.EvalRequest, clearmed.estimate_run) == (EvalRequest, estimate_run)
    assert (clearmed.evaluate_suite, clearmed.merge_shards) == (evaluate_suite, merge_shards)
    assert (clearmed.runs_frame, clearmed.compare_runs) == (runs_frame, compare_runs)
    assert set(clearmed.__all__) == {
        "compare_runs",
        "__version__",
        "build_program",
        "evaluate",
        "evaluate_suite",
        "merge_shards",
        "load_config",
        "results_frame",
        "runs_frame",
        "EvalRequest",
        "estimate_run",
        # every other work verb's request and function (tests/test_one_door.py)
        "AskRequest",
        "ask",
        "CompileRequest",
        "compile",
        "TuneRequest",
        "tune",
        "IndexBuildRequest",
        "build_corpus_index",
        "IndexWarmRequest",
        "warm_hit_cache",
        "ExportRequest",
        "export_runs",
        "CompareRequest",
        "MergeRequest",
        "DoctorRequest",
        "check_config",
        "ReportRequest",
        "report_runs",
        "SftExportRequest",
        "export_teacher_traces",
    }
    with pytest.raises(AttributeError, match="no attribute 'evaluat'"):
        getattr(clearmed, "evaluat")  # noqa: B009


# ------------------------------------------------------------------------------------------------ plain questions


def test_plain_questions_become_records() -> None:
    mcq = question_of({"question": "Which?", "options": ["one", "two", "three"], "answer": "b"})
    assert (mcq.options, mcq.gold_letters, mcq.answer_mode) == ({"A": "one", "B": "two", "C": "three"}, ["B"], "single")
    multi = question_of({"question": "Which?", "options": {"A": "x", "B": "y"}, "answer": "A, B", "multi": True})
    assert (multi.gold_letters, multi.answer_mode) == (["A", "B"], "multi")
    free = question_of({"question": "What?", "answer": "a text", "id": "mine"})
    assert (free.id, free.answer_mode, free.gold_text, free.options) == ("mine", "free_text", "a text", None)
    assert question_of("What causes scurvy?").answer_mode == "free_text"
    record = Question(id="r", text="Which?", options={"A": "x", "B": "y"})
    assert question_of(record) is record
    # Without an id, the id is the question's own: the same on every run, so a run folder resumes.
    assert question_of("What causes scurvy?").id == question_of("What causes scurvy?").id
    assert (
        question_of("What causes scurvy?").id
        != question_of({"question": "What causes scurvy?", "options": ["a", "b"]}).id
    )


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"question": "Which?", "options": ["x", "y"], "answer": "C"}, r"question 0: .*gold letters \['C'\] are not"),
        ({"question": "Which?", "options": ["x"]}, "question 0: .*needs at least two options"),
        ({"question": "Which?", "options": "x, y"}, "question 0: options: give a list of option texts"),
        ({"text": "Which?"}, "question 0: question: Field required; text: Extra inputs are not permitted"),
        ({"question": "Which?", "options": ["x", "x"]}, "question 0: .*two options have the same text"),
        ({"question": "Which?", "options": ["x", "y"], "answer": "A,B"}, "question 0: .*exactly one gold letter"),
        (7, "question 0: a question is a string, a dict or a Question, not int"),
    ],
)
def test_a_malformed_question_is_one_line_naming_it(item: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        question_of(item, 0)


def test_forward_takes_a_question_as_text_and_options(scripted: None, demo_config: Path) -> None:
    program = clearmed.build_program("clear", clearmed.load_config(str(demo_config)))
    prediction = program(question="Which vitamin deficiency causes scurvy?", options=["Vitamin D", "Vitamin C"])
    assert prediction.answer.display() == "B"
    assert prediction.decision.bundle.question.options == {"A": "Vitamin D", "B": "Vitamin C"}
    direct = clearmed.build_program("direct", clearmed.load_config(str(demo_config)))
    assert direct(question="What causes scurvy?").decision.bundle.question.answer_mode == "free_text"
    with pytest.raises(TypeError, match="options go inside the Question record"):
        program(question=Question(id="q", text="Which?", options={"A": "x", "B": "y"}), options=["x", "y"])
    with pytest.raises(TypeError, match="a question is a Question record or its text, not int"):
        program(question=7)


# ------------------------------------------------------------------------------------------------ evaluate


def _comparable(run_dir: Path) -> dict[str, Any]:
    """What a run folder says, less what differs between two runs of the same thing (times, where it is)."""
    summary = json.loads((run_dir / "summary.json").read_text())
    for timing in ("mean_seconds", "median_seconds"):
        summary["cost"].pop(timing)
    summary["cost_by_route"] = [{**row, "mean_seconds": 0} for row in summary["cost_by_route"]]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest.pop("created")
    decisions = [
        record.decision.model_dump(exclude={"usage"}) | {"score": record.score}
        for record in sorted(read_records(run_dir), key=lambda record: record.index)
    ]
    files = sorted(str(path.relative_to(run_dir)) for path in run_dir.rglob("*") if path.parent == run_dir)
    return {"summary": summary, "manifest": manifest, "decisions": decisions, "files": files}


def test_evaluate_writes_the_run_folder_clearmed_eval_writes(
    scripted: None, demo_config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_run, api_run = tmp_path / "cli", tmp_path / "api"
    argv = ["eval", "--program", "direct", "--benchmark", "demo", "--limit", "4", "--seed", "1"]
    assert main([*argv, "-c", str(demo_config), "--run-dir", str(cli_run)]) == 0
    summary = clearmed.evaluate("direct", "demo", config=str(demo_config), run_dir=api_run, limit=4, seed=1)
    assert summary.evaluated == 4
    assert _comparable(api_run) == _comparable(cli_run)
    assert (api_run / "report" / "index.html").is_file()
    capsys.readouterr()
    assert main(["compare", str(cli_run), str(api_run)]) == 0
    assert "| api | direct | demo | 4/4 |" in capsys.readouterr().out


def test_evaluate_resumes_its_folder_and_refuses_another_run_in_it(
    scripted: None, demo_config: Path, tmp_path: Path
) -> None:
    questions = [{"question": f"Case {n}. Which?", "options": ["x", "y"], "answer": "A"} for n in range(5)]
    run_dir = tmp_path / "run"
    clearmed.evaluate("direct", questions[:5], config=str(demo_config), run_dir=run_dir, limit=3)
    first = {r.question_id: r.finished for r in read_records(run_dir)}
    again = clearmed.evaluate("direct", questions, config=str(demo_config), run_dir=run_dir, limit=3)
    assert again.evaluated == 3
    assert {r.question_id: r.finished for r in read_records(run_dir)} == first  # nothing was asked twice
    with pytest.raises(Exception, match="holds a different run"):
        clearmed.evaluate("clear", questions, config=str(demo_config), run_dir=run_dir, limit=3)


def test_evaluate_refuses_what_it_cannot_run_in_one_line(demo_config: Path, tmp_path: Path) -> None:
    config = str(demo_config)
    with pytest.raises(UsageError, match=r"questions 0 and 1 have the same id 'q-[0-9a-f]{12}'"):
        clearmed.evaluate("direct", ["What?", "What?"], config=config, run_dir=tmp_path / "a")
    with pytest.raises(UsageError, match="questions: no questions to evaluate"):
        clearmed.evaluate("direct", [], config=config, run_dir=tmp_path / "b")
    with pytest.raises(UsageError, match="a list of questions takes neither"):
        clearmed.evaluate("direct", ["What?"], config=config, run_dir=tmp_path / "c", split="test")
    with pytest.raises(UsageError, match="unknown program 'nope'"):
        clearmed.evaluate("nope", ["What?"], config=config, run_dir=tmp_path / "d")
    with pytest.raises(UsageError, match=r"program must be a program name or a dspy\.Module, not int"):
        clearmed.evaluate(3, ["What?"], config=config, run_dir=tmp_path / "e")
    assert not any((tmp_path / name).exists() for name in "abcde")


def test_a_budget_reached_is_raised_after_the_summary_of_what_was_done(
    scripted: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    priced = tmp_path / "priced.toml"
    backbone = UNREACHABLE_BACKBONE + "\nprice = { input = 1000.0, output = 2000.0 }"
    priced.write_text(demo_config_toml(backbone=backbone, program="json_fallback = false"), encoding="utf-8")
    with pytest.raises(BudgetReached, match="budget reached: spent"):
        clearmed.evaluate("direct", "demo", config=str(priced), run_dir=tmp_path / "run", limit=4, max_cost=0.01)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["evaluated"], summary["planned"]) == (1, 4)
    # finished as `clearmed eval` leaves a stopped run: the tables, the plots and the HTML report too
    for name in ("summary.md", "leakage.json", "plots/accuracy.png", "report/index.html"):
        assert (tmp_path / "run" / name).is_file(), name
    resumed = clearmed.evaluate("direct", "demo", config=str(priced), run_dir=tmp_path / "run", limit=4, max_cost=100)
    assert resumed.evaluated == 4
    with pytest.raises(UsageError, match="max_cost must be a positive number of US dollars, not 0"):
        clearmed.evaluate("direct", "demo", config=str(priced), run_dir=tmp_path / "run", max_cost=0)


def test_a_fatal_service_error_stops_the_run_with_no_summary(
    demo_config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = lm15.AuthError("Incorrect API key provided", status=401)
    engine = ScriptedEngine(script={"parametric": refused})
    lm = ClearmedLM("local/scripted", service="main backbone m", engine=engine, cache=False, num_retries=0)
    monkeypatch.setattr(assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm})
    with pytest.raises(FatalServiceError, match="main backbone m: authentication failed"):
        clearmed.evaluate("direct", ["What causes scurvy?"], config=str(demo_config), run_dir=tmp_path / "run")
    assert not (tmp_path / "run" / "summary.json").exists()
    assert list(read_records(tmp_path / "run")) == []


# ------------------------------------------------------------------------------------------------ the README


def readme_section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def blocks(section: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.DOTALL)


def test_the_readme_python_example_runs_and_its_folders_go_to_compare_report_and_export(
    scripted: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    section = readme_section("Python API")
    python, commands = blocks(section, "python"), blocks(section, "bash")
    assert len(python) == 2
    assert len(commands) == 1
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}
    for code in python:  # as a reader pastes them, one after the other
        exec(compile(code, "README.md", "exec"), namespace)
    for line in commands[0].strip().splitlines():
        argv = shlex.split(line.partition("#")[0])
        assert argv[0] == "clearmed"
        assert main(argv[1:]) == 0, line
    assert namespace["summary"].degraded == 0  # every stage the example meets answered
    out = capsys.readouterr().out
    assert "| clear | clear | questions | 3/3 |" in out
    assert "| direct | direct | questions | 3/3 |" in out
    for run in ("clear", "direct"):
        assert (tmp_path / "runs/python-api" / run / "summary.json").is_file()
    assert (tmp_path / "runs/python-api/report/index.html").is_file()
    import pandas as pd

    table = pd.read_parquet(tmp_path / "clear.parquet")
    assert list(table.question_id) == [q.id for q in map(question_of, namespace["questions"])]
    assert table.correct.tolist()[:2] == [True, False]  # the scripted scores favour A: B (scurvy) is missed
    assert table.correct.isna().tolist() == [False, False, True]  # free text is answered, not scored
    every_run = [json.loads(line) for line in (tmp_path / "all.jsonl").read_text().splitlines()]
    assert sorted({(row["run"], row["program"]) for row in every_run}) == [
        ("runs/python-api/clear", "clear"),
        ("runs/python-api/direct", "direct"),
    ]
    assert len(every_run) == 6
    saved = json.loads((tmp_path / "runs/python-api/dspy.json").read_text())
    assert [row["exact"] for row in saved] == [True, False]
    assert all(row["decision"]["bundle"]["question"]["options"] for row in saved)


def test_dspy_evaluate_saves_plain_examples_as_json(scripted: None, demo_config: Path, tmp_path: Path) -> None:
    program = clearmed.build_program("clear", clearmed.load_config(str(demo_config)))
    devset = [
        dspy.Example(
            question="Which vitamin deficiency causes scurvy?", options=["Vitamin D", "Vitamin C"], gold="B"
        ).with_inputs("question", "options"),
        dspy.Example(question="What causes scurvy?", gold="").with_inputs("question"),
    ]
    out = tmp_path / "results.json"

    def exact(example: dspy.Example, prediction: dspy.Prediction, trace: object = None) -> bool:
        return prediction.answer is not None and prediction.answer.display() == example.gold

    result = dspy.Evaluate(devset=devset, metric=exact, save_as_json=str(out), display_progress=False)(program)
    assert result.score == 50.0
    rows = json.loads(out.read_text())
    assert [row["decision"]["status"] for row in rows] == ["answered", "answered"]
    assert rows[0]["decision"]["answer"]["letters"] == ["B"]


# ------------------------------------------------------------------------------------------------ one question format


def test_evaluate_reads_the_shared_copy_as_clearmed_eval_does(
    scripted: None, demo_config: Path, tmp_path: Path
) -> None:
    from clearmed.api.questions import shared_source
    from clearmed.retrieval.corpus import CorpusError

    try:
        shared = shared_source("medqa")
    except CorpusError:
        pytest.skip("the shared data folder is absent")
    if not shared.is_file():
        pytest.skip(f"{shared} is absent")
    cli_run, api_run = tmp_path / "cli", tmp_path / "api"
    argv = ["eval", "--program", "direct", "--benchmark", "medqa", "--source", "shared", "--limit", "2"]
    assert main([*argv, "-c", str(demo_config), "--run-dir", str(cli_run)]) == 0
    summary = clearmed.evaluate("direct", "medqa", source="shared", limit=2, config=str(demo_config), run_dir=api_run)
    assert summary.evaluated == 2
    assert json.loads((api_run / "manifest.json").read_text())["source"] == str(shared)
    assert _comparable(api_run) == _comparable(cli_run)


def test_a_file_of_your_own_questions_is_the_list_evaluate_takes(
    scripted: None, demo_config: Path, tmp_path: Path
) -> None:
    questions: list[dict[str, object]] = [
        {"question": "Which vitamin deficiency causes scurvy?", "options": ["Vitamin D", "Vitamin C"], "answer": "B"},
        {"id": "htn-1", "question": "First-line drug class for hypertension?", "options": ["Thiazides", "Digoxin"]},
        {"question": "Which gland makes cortisol?", "options": {"A": "Adrenal", "B": "Pineal"}, "answer": "A"},
    ]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in questions), encoding="utf-8")
    config = str(demo_config)
    listed = clearmed.evaluate("direct", questions, config=config, run_dir=tmp_path / "list")
    filed = clearmed.evaluate("direct", "questions", source=str(path), config=config, run_dir=tmp_path / "file")
    assert (filed.benchmark, filed.evaluated) == (listed.benchmark, listed.evaluated) == ("questions", 3)
    answers = [
        [(r.question_id, r.decision.answer) for r in sorted(read_records(run), key=lambda r: r.index)]
        for run in (tmp_path / "list", tmp_path / "file")
    ]
    assert answers[0] == answers[1]
    assert [qid for qid, _ in answers[0]] == [question_of(item).id for item in questions]
    assert filed.accuracy == listed.accuracy
    # htn-1 has no answer: answered, not scored (as a free-text question without its reference), never a traceback
    assert filed.unscored == 1
    assert filed.accuracy is not None
    assert filed.accuracy.n == 2
