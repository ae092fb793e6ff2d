"""Prompt compilation: every optimizer end to end on the toy program with canned LMs, artifacts, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import dspy
import pytest

from clearmed.api import assemble
from clearmed.cli.main import main
from clearmed.config import load_config
from clearmed.core.errors import UsageError
from clearmed.optimize.artifacts import apply_artifact, load_artifact, new_manifest, write_artifact
from clearmed.optimize.compiling import (
    CompileLMs,
    CompileSettings,
    compile_program,
    describe_outcome,
    feedback_metric,
    frozen_except,
    predictor_names,
    resolve_stages,
    to_examples,
)
from clearmed.optimize.splits import UsedIds
from clearmed.programs.clear import CLEAR
from clearmed.retrieval.memory import InMemoryRetriever, InMemoryWebSearch
from clearmed.signatures.records import Question, Thresholds
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import LOCAL, QUESTION, WEB, ScriptedCall, label_all, pathway_replies, verifier_reply

from .echo_lm import EchoEngine, echo_lm

SCRIPT = {
    **pathway_replies("A", "A", "B"),
    "source_quality": label_all("medium"),
    "verifier": verifier_reply("consensus"),
    "followup_query": {"query": "thyroid"},
    "audit": {
        "rationale": "r",
        "clearly_supports_challenger": False,
        "aligned_with_question": True,
        "supports_exact_option": True,
    },
}
QUESTIONS = [
    QUESTION.model_copy(update={"id": f"q{i}", "gold_letters": ["B" if i % 3 == 0 else "A"]}) for i in range(8)
]
THRESHOLDS = Thresholds(audit_min_medium=1, unanimity_fast_path=True)  # the pathways are never unanimous here


def toy(thresholds: Thresholds | None = THRESHOLDS) -> tuple[CLEAR, dspy.LM, EchoEngine]:
    lm, engine = echo_lm(SCRIPT)
    program = CLEAR(
        InMemoryRetriever(LOCAL),
        InMemoryWebSearch(WEB),
        settings=ProgramSettings(json_fallback=False, parallel_pathways="off"),
        thresholds=thresholds,
        role_lms={"main": lm},
    )
    return program, lm, engine


SMALL = {"max_demos": 1, "candidates": 2, "auto": None, "trials": 2, "max_metric_calls": 12, "bsize": 2, "max_steps": 1}


@pytest.mark.parametrize("optimizer", ["bootstrap", "bootstrap-rs", "mipro", "gepa", "simba"])
def test_each_optimizer_compiles_the_program_end_to_end(optimizer: str) -> None:
    program, lm, engine = toy()
    prompt_lm, prompt_engine = echo_lm()
    teacher_lm, teacher_engine = echo_lm(SCRIPT)
    settings = CompileSettings(optimizer=optimizer, stages=["parametric.answer", "verifier.verify"], **SMALL)  # type: ignore[arg-type]
    compiled, report = compile_program(
        program, QUESTIONS[:4], QUESTIONS[4:], settings, CompileLMs(task=lm, teacher=teacher_lm, prompt=prompt_lm)
    )
    assert isinstance(compiled, CLEAR)
    assert predictor_names(compiled) == predictor_names(program)  # nothing left frozen or hidden
    assert all(predictor.lm is None for _, predictor in compiled.named_predictors())
    assert compiled.thresholds == THRESHOLDS
    assert report.val_before.accuracy.n == report.val_after.accuracy.n == 4
    assert report.compile_lm_calls > 0
    assert engine.calls
    if optimizer in ("mipro", "gepa"):
        assert prompt_engine.calls  # the proposer / reflection LM is the prompt role
    if optimizer in ("bootstrap", "bootstrap-rs", "mipro"):
        assert teacher_engine.calls  # demos are bootstrapped by the teacher role
    # Frozen predictors kept their prompts: no demos, original instructions.
    assert compiled.guard.assess.demos == []
    assert compiled.guard.assess.signature.instructions == program.guard.assess.signature.instructions


def test_bootstrap_adds_demos_to_the_open_stages_only() -> None:
    program, lm, _ = toy()
    settings = CompileSettings(optimizer="bootstrap", stages=["parametric.answer"], max_demos=2)
    compiled, _ = compile_program(program, QUESTIONS[:4], QUESTIONS[4:], settings, CompileLMs(task=lm))
    demos = {name: len(p.demos) for name, p in compiled.named_predictors()}
    assert demos["parametric.answer"] >= 1
    assert all(count == 0 for name, count in demos.items() if name != "parametric.answer")


def _prompts(engine: EchoEngine) -> list[tuple[str, str]]:
    return [(call.system, call.user) for call in engine.calls]


def test_artifact_round_trip_gives_identical_prompts_and_predictions(tmp_path: Path) -> None:
    program, lm, _ = toy()
    settings = CompileSettings(optimizer="bootstrap", max_demos=2)
    compiled, report = compile_program(program, QUESTIONS[:4], QUESTIONS[4:], settings, CompileLMs(task=lm))
    compiled.verifier.verify.signature = compiled.verifier.verify.signature.with_instructions("Route with care.")
    config = load_config("embedded")
    manifest = new_manifest("compile", "clear", config, benchmark="toy", optimizer="bootstrap", has_program_state=True)
    write_artifact(
        tmp_path / "art",
        manifest,
        thresholds=compiled.thresholds,
        ids=UsedIds(train=[q.id for q in QUESTIONS[:4]], val=[q.id for q in QUESTIONS[4:]]),
        config=config,
        program=compiled,
        reports={"scores.json": report.model_dump_json()},
    )
    state = json.loads((tmp_path / "art" / "program.json").read_text())
    assert all(entry["lm"] is None for name, entry in state.items() if name != "metadata")

    fresh, _, _ = toy(thresholds=Thresholds())
    artifact = load_artifact(tmp_path / "art")
    assert apply_artifact(fresh, artifact, config) == []  # same backbone, same program: no warning
    assert fresh.thresholds == THRESHOLDS  # thresholds survive
    assert fresh.verifier.verify.signature.instructions == "Route with care."

    # Same canned LM for both: identical prompts (instructions and demos) and identical decisions.
    shared_lm, engine = echo_lm(SCRIPT)
    outputs = []
    for candidate in (compiled, fresh):
        candidate.role_lms = {"main": shared_lm}
        engine.calls.clear()
        decision = candidate(question=QUESTIONS[6]).decision
        outputs.append((decision.answer, decision.route, decision.deciding_rule, _prompts(engine)))
    assert outputs[0] == outputs[1]
    assert any("Route with care." in system for system, _ in outputs[1][3])


def test_loading_onto_another_backbone_warns_but_works(tmp_path: Path) -> None:
    program, _, _ = toy()
    embedded = load_config("embedded")
    write_artifact(
        tmp_path / "art",
        new_manifest("compile", "clear", embedded, has_program_state=True),
        thresholds=THRESHOLDS,
        ids=UsedIds(),
        config=embedded,
        program=program,
    )
    other = embedded.model_copy(
        update={"backbones": {"main": embedded.backbones["main"].model_copy(update={"model": "other-model"})}}
    )
    fresh, _, _ = toy(thresholds=None)
    warnings = apply_artifact(fresh, load_artifact(tmp_path / "art"), other)
    assert len(warnings) == 1
    assert "optimized on embedded:qwen2.5-coder-1.5b-instruct" in warnings[0]
    assert fresh.thresholds == THRESHOLDS


def test_stage_names_and_freezing() -> None:
    program, _, _ = toy()
    assert resolve_stages(program, "verifier,parametric.answer") == ["parametric.answer", "verifier.verify"]
    assert set(resolve_stages(program, "local")) == {n for n in predictor_names(program) if n.startswith("local.")}
    with pytest.raises(UsageError, match="no predictor 'nope'"):
        resolve_stages(program, "nope")
    with frozen_except(program, ["verifier.verify"]):
        assert predictor_names(program) == ["verifier.verify"]
    assert len(predictor_names(program)) > 10


def test_gepa_feedback_names_route_rule_and_gold() -> None:
    program, _lm, _ = toy()
    question = QUESTIONS[0]  # gold B; the program answers A
    pred = program(question=question)
    feedback = feedback_metric(to_examples([question])[0], pred, None, "verifier.verify", None)
    assert feedback.score == 0.0
    for part in (
        "answered A (wrong)",
        "gold answer is B",
        "Route consensus",
        "rule",
        "parametric A",
        "verifier.verify",
    ):
        assert part in feedback.feedback
    assert "no decision" in describe_outcome(to_examples([question])[0], None, 0.0)


def test_bad_sizes_are_usage_errors() -> None:
    program, lm, _ = toy()
    with pytest.raises(UsageError, match="bsize"):
        compile_program(
            program, QUESTIONS[:2], QUESTIONS[4:], CompileSettings(optimizer="simba", bsize=5), CompileLMs(task=lm)
        )
    with pytest.raises(UsageError, match="--trials"):
        compile_program(
            program, QUESTIONS[:2], QUESTIONS[4:], CompileSettings(optimizer="mipro", auto=None), CompileLMs(task=lm)
        )


# --------------------------------------------------------------------------------------------- CLI


def _answer_a(call: ScriptedCall) -> dict[str, object]:
    cited = {"cited_ids": []} if "evidence" in call.user else {}
    return {"rationale": "because", **cited, "answer": "A"}


@pytest.fixture
def canned(monkeypatch: pytest.MonkeyPatch) -> EchoEngine:
    lm, engine = echo_lm(
        {
            "parametric": _answer_a,
            "local_answer": _answer_a,
            "dynamic_answer": _answer_a,
            "source_quality": label_all("high"),
            "verifier": verifier_reply("consensus"),
        }
    )
    prompt_lm, _ = echo_lm()
    monkeypatch.setattr(
        assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm, "prompt_model": prompt_lm}
    )
    return engine


def test_compile_then_eval_with_the_artifact(
    canned: EchoEngine, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "secret-key-123")
    out = tmp_path / "compiled"
    (tmp_path / "held.txt").write_text("demo-01\ndemo-02\ndemo-03\n")
    argv = ["compile", "--optimizer", "bootstrap", "--benchmark", "demo", "--train", "3", "--val", "2"]
    assert main([*argv, "--exclude-ids", str(tmp_path / "held.txt"), "--out", str(out)]) == 0
    assert "| after |" in capsys.readouterr().out
    artifact = load_artifact(out)
    assert artifact.manifest.kind == "compile"
    assert artifact.manifest.optimizer == "bootstrap"
    assert artifact.manifest.dspy_version == dspy.__version__
    assert len(artifact.ids.train) == 3
    assert len(artifact.ids.val) == 2
    assert not artifact.ids.seen() & {"demo-01", "demo-02", "demo-03"}
    scores = json.loads((out / "scores.json").read_text())
    assert scores["val_before"]["accuracy"]["n"] == 2
    assert "wilson" in scores["val_after"]["accuracy"]
    assert not any("secret-key-123" in path.read_text() for path in out.glob("*.json"))

    # The whole demo bundle includes the artifact's train ids: refused, clearly.
    assert main(["eval", "--benchmark", "demo", "--program-artifact", str(out)]) == 2
    err = capsys.readouterr().err
    assert "were used to optimize" in err
    assert err.startswith("clearmed: error:")

    run_dir = tmp_path / "run"
    evaluate = ["eval", "--benchmark", "demo", "--limit", "2", "--program-artifact", str(out), "--run-dir"]
    assert main([*evaluate, str(run_dir), "--allow-train-overlap"]) == 0
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["artifact"] == str(out.resolve())
    # The same folder without the artifact is another run: refused rather than mixed.
    assert main(["eval", "--benchmark", "demo", "--limit", "2", "--run-dir", str(run_dir)]) == 2
    capsys.readouterr()

    assert main(["ask", "--demo", "demo-01", "--json", "--program-artifact", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["question_id"] == "demo-01"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--train", "0", "--val", "2"], "--train and --val must both be at least 1"),
        (["--train", "9", "--val", "9"], "18 are needed"),
        (["--train", "2", "--val", "1", "--stages", "nope"], "no predictor 'nope'"),
        (["--train", "2", "--val", "1", "--max-demos", "-1"], "--max-demos"),
    ],
)
def test_compile_cli_bad_input_is_one_clear_line(
    canned: EchoEngine, tmp_path: Path, argv: list[str], message: str, capsys
) -> None:
    base = ["compile", "--optimizer", "bootstrap", "--benchmark", "demo", "--out", str(tmp_path / "o")]
    assert main([*base, *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.startswith("clearmed: error:")
    assert "Traceback" not in err


def test_compile_refuses_an_existing_artifact_and_eval_a_missing_one(
    canned: EchoEngine, tmp_path: Path, capsys
) -> None:
    (tmp_path / "manifest.json").write_text("{}")
    argv = ["compile", "--optimizer", "bootstrap", "--benchmark", "demo", "--train", "1", "--val", "1"]
    assert main([*argv, "--out", str(tmp_path)]) == 2
    assert "already holds an artifact" in capsys.readouterr().err
    assert main(["eval", "--benchmark", "demo", "--program-artifact", str(tmp_path / "none")]) == 2
    assert "not a program artifact" in capsys.readouterr().err


def test_examples_carry_the_question_as_the_only_input() -> None:
    example = to_examples([QUESTION])[0]
    assert set(example.inputs().keys()) == {"question"}
    assert isinstance(example.question, Question)
    assert example.gold == "A"


def test_compile_selects_train_and_val_from_a_real_benchmark_file(shared_data: Path, tmp_path: Path) -> None:
    # Goes through eval's question loader with compile's own arguments (a missing flag once crashed real runs).
    from clearmed.api.compile import CompileRequest, select_questions
    from clearmed.cli.main import build_parser, parsed_request

    held = tmp_path / "held.txt"
    held.write_text("medqa:dev:48\n")
    argv = [
        "compile",
        "--optimizer",
        "bootstrap",
        "--benchmark",
        "medqa",
        "--source",
        "shared",
        "--train",
        "3",
        "--val",
        "2",
        "--out",
        "x",
    ]
    args = build_parser().parse_args([*argv, "--exclude-ids", str(held)])
    _, train, val = select_questions(parsed_request(CompileRequest, args))
    ids = [q.id for q in [*train, *val]]
    assert (len(train), len(val)) == (3, 2)
    assert "medqa:dev:48" not in ids
    assert len(set(ids)) == 5


def test_bootstrap_gives_scored_pathways_demos_that_reach_their_scored_prompts() -> None:
    # Scored pathways generate nothing, so demos exist only because each scored answer is put in DSPy's trace
    # (`_option_scoring._trace`); without it a compile of the embedded configs would change no prompt.
    from clearmed.testing import SCORED_CALIBRATED, build_toy_program

    scores = {
        "parametric": {"A": 0.6, "B": 0.2, "C": 0.1, "D": 0.1},
        "local_answer": {"A": 0.7, "B": 0.1, "C": 0.1, "D": 0.1},
        "dynamic_answer": {"A": 0.5, "B": 0.3, "C": 0.1, "D": 0.1},
    }
    script = {"source_quality": label_all("high"), "followup_query": {"query": "thyroid"}, "audit": SCRIPT["audit"]}
    program, engine, _ = build_toy_program(script, settings=SCORED_CALIBRATED, scores=scores)
    stages = ["parametric.answer", "local.reader.answer", "dynamic.reader.answer"]
    settings = CompileSettings(optimizer="bootstrap", stages=stages, max_demos=1)
    gold_a = [q for q in QUESTIONS if q.gold_letters == ["A"]]
    lm = program.role_lms["main"]
    compiled, report = compile_program(program, gold_a[:2], gold_a[2:4], settings, CompileLMs(task=lm))
    assert {c.stage for c in engine.calls} <= {"source_quality"}  # every pathway scored; no verifier call
    for name in stages:
        (demo,) = dict(compiled.named_predictors())[name].demos
        assert demo["answer"] == "A"
        assert demo["question"]
    engine.scored_prompts.clear()
    compiled(question=gold_a[0])
    parametric_prompt, _ = engine.scored_prompts[0]
    # the demo is an earlier user/assistant exchange ahead of the question being scored
    assert [m["role"] for m in parametric_prompt].count("assistant") == 1
    assert report.val_after.accuracy.n == 2
