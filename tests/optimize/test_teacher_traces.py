"""Teacher-trace export: the paper's validation filters, the KG/reasoning boundary, and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clearmed.cli.main import main
from clearmed.evaluation.store import EvalRecord
from clearmed.optimize.teacher_traces import ANALYSIS, SftExample, export_sft, rejection
from clearmed.signatures.records import Decision
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import QUESTION, ScriptValue, build_toy_program, label_all, pathway_replies, verifier_reply

ENTITIES = [
    {"id": "E1", "name": "hypothyroidism", "type": "DISO", "evidence": ["L1"]},
    {"id": "E2", "name": "cold intolerance", "type": "sign or symptom", "evidence": ["L1"]},
]
RELATIONS = [{"id": "R1", "source": "E1", "relation": "causes", "target": "E2", "evidence": ["L1"]}]


def judge_reply(**overrides: object) -> dict[str, object]:
    reply: dict[str, object] = {
        "entities": ENTITIES,
        "relations": RELATIONS,
        "verdicts": [
            {"option": "A", "evidence": ["E1", "L1"], "note": "causes weight gain and cold", "verdict": "supported"},
            {"option": "B", "evidence": ["L2"], "note": "causes heat intolerance", "verdict": "contradicted"},
            {"option": "C", "evidence": [], "verdict": "insufficient"},
            {"option": "D", "evidence": [], "verdict": "insufficient"},
        ],
        "decision": "grounded",
        "answer": "A",
    }
    return {**reply, **overrides}


def decision_with(local_judge: ScriptValue, mode: str = "explicit") -> Decision:
    script: dict[str, ScriptValue] = {
        **pathway_replies("A", "A", "A"),
        "local_judge": local_judge,
        "source_quality": label_all("high"),
        "verifier": verifier_reply("consensus"),
    }
    settings = ProgramSettings(
        json_fallback=False, parallel_pathways="off", local_answerer="judge", judge_mode=mode, passage_words=40
    )
    program, _, _ = build_toy_program(script, settings=settings)
    return program(question=QUESTION).decision


def reason_of(decision: Decision) -> str | None:
    judgment = decision.bundle.candidate("local").judgment
    assert judgment is not None
    return rejection(decision, judgment)


def test_a_clean_explicit_trace_is_kept_with_its_segments(tmp_path: Path) -> None:
    decision = decision_with(judge_reply())
    assert reason_of(decision) is None
    report = export_sft([(decision, "teacher-run")], tmp_path / "sft.jsonl", lambda_g=0.1, passage_words=40)
    assert (report.considered, report.kept) == (1, 1)
    example = SftExample.model_validate_json((tmp_path / "sft.jsonl").read_text().splitlines()[0])
    target = example.messages[-1].content
    kg, reasoning = example.segments
    assert target[kg.start : kg.end].startswith("<KG>")
    assert "ENTITY E2 | cold intolerance | DISO | [L1]" in target[kg.start : kg.end]
    assert target[reasoning.start : reasoning.end].startswith(ANALYSIS)
    assert (kg.weight, reasoning.weight, reasoning.end) == (0.1, 1.0, len(target))
    assert "[A] evidence: L1 | causes weight gain and cold | verdict: SUPPORTED" in target
    assert target.endswith("DECISION: grounded\nANSWER: A")
    assert "knowledge graph" in example.messages[0].content
    assert "[L1]" in example.messages[1].content
    assert "gold" not in example.messages[1].content.casefold()  # the teacher never saw the answer key
    assert example.source == "teacher-run"


def test_implicit_trace_has_an_empty_kg_segment(tmp_path: Path) -> None:
    reply = judge_reply()
    del reply["entities"], reply["relations"]
    reply["verdicts"][0]["evidence"] = ["L1"]  # type: ignore[index]  # no graph ids to cite in implicit mode
    decision = decision_with(reply, mode="implicit")
    export_sft([(decision, "r")], tmp_path / "sft.jsonl")
    example = SftExample.model_validate_json((tmp_path / "sft.jsonl").read_text())
    assert example.segments[0].end == 0
    assert example.messages[-1].content.startswith(ANALYSIS)


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"decision": "elimination"}, "decision_inconsistent"),
        ({"decision": "whatever"}, "format"),
        ({"answer": "C"}, "answer_inconsistent"),  # the rule answers A (the only supported option); the model said C
        (
            {
                "verdicts": [
                    {"option": "A", "evidence": ["L1"], "verdict": "supported"},
                    {"option": "B", "evidence": ["L9"], "verdict": "contradicted"},
                ]
            },
            "format",  # C and D unjudged
        ),
        (
            {
                "verdicts": [
                    {"option": "A", "evidence": ["L1"], "verdict": "supported"},
                    {"option": "B", "evidence": ["L9"], "verdict": "contradicted"},
                    {"option": "C", "evidence": [], "verdict": "insufficient"},
                    {"option": "D", "evidence": [], "verdict": "insufficient"},
                ]
            },
            "invalid_citation",
        ),
        (
            {
                "verdicts": [
                    {"option": "A", "evidence": ["L1"], "verdict": "contradicted"},
                    {"option": "B", "evidence": ["L2"], "verdict": "supported"},
                    {"option": "C", "evidence": [], "verdict": "insufficient"},
                    {"option": "D", "evidence": [], "verdict": "insufficient"},
                ],
                "answer": "B",
            },
            "wrong_answer",
        ),
        (
            {
                "verdicts": [
                    {"option": "A", "evidence": ["L1"], "note": "the correct answer is A", "verdict": "supported"},
                    {"option": "B", "evidence": [], "verdict": "insufficient"},
                    {"option": "C", "evidence": [], "verdict": "insufficient"},
                    {"option": "D", "evidence": [], "verdict": "insufficient"},
                ]
            },
            "leakage",
        ),
    ],
)
def test_each_validation_rejects_its_traces(overrides: dict[str, object], reason: str) -> None:
    assert reason_of(decision_with(judge_reply(**overrides))) == reason


def test_graph_citing_missing_passages_is_an_invalid_citation() -> None:
    entities = [*ENTITIES, {"id": "E3", "name": "x", "type": "DISO", "evidence": ["L1", "W7"]}]
    assert reason_of(decision_with(judge_reply(entities=entities))) == "invalid_citation"


def test_salvaged_traces_fail_format() -> None:
    raw = (
        "[[ ## entities ## ]]\n[]\n[[ ## relations ## ]]\n[]\n[[ ## verdicts ## ]]\nA: supported [L1]\nB: insufficient\n"
        "C: insufficient\nD: insufficient\n[[ ## decision ## ]]\ngrounded\n[[ ## answer ## ]]\nA"
    )
    decision = decision_with(raw)
    judgment = decision.bundle.candidate("local").judgment
    assert judgment is not None
    assert judgment.salvaged
    assert reason_of(decision) == "format"


def test_export_counts_rejections_and_skips_excluded_ids(tmp_path: Path) -> None:
    good = decision_with(judge_reply())
    bad = decision_with(judge_reply(decision="elimination"))
    report = export_sft([(good, "r"), (bad, "r")], tmp_path / "a.jsonl")
    assert (report.considered, report.kept, report.rejected) == (2, 1, {"decision_inconsistent": 1})
    report = export_sft([(good, "r")], tmp_path / "b.jsonl", exclude_ids=frozenset({good.question_id}))
    assert report.considered == 0


def test_lambda_g_must_be_a_weight(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lambda_g"):
        export_sft([], tmp_path / "x.jsonl", lambda_g=1.5)


def _run_folder(tmp_path: Path, decisions: list[Decision]) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    lines = [
        EvalRecord(question_id=d.question_id, index=i, program="clear-judge", decision=d, seconds=1.0, finished="now")
        for i, d in enumerate(decisions)
    ]
    (run / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in lines))
    (run / "config.json").write_text(json.dumps({"program": {"passage_words": 40}}))
    return run


def test_cli_exports_from_run_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run_folder(tmp_path, [decision_with(judge_reply())])
    out = tmp_path / "sft.jsonl"
    assert main(["export-sft", "--run", str(run), "--out", str(out), "--lambda-g", "0.1", "--pathways", "local"]) == 0
    assert len(out.read_text().splitlines()) == 1
    assert "kept" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lambda-g", "2"], "--lambda-g must be in [0, 1]"),
        (["--pathways", "parametric"], "--pathways takes"),
    ],
)
def test_cli_rejects_bad_arguments_cleanly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    run = _run_folder(tmp_path, [])
    assert main(["export-sft", "--run", str(run), "--out", str(tmp_path / "o.jsonl"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_cli_rejects_a_folder_that_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export-sft", "--run", str(tmp_path), "--out", str(tmp_path / "o.jsonl")]) == 2
    assert "not a run folder" in capsys.readouterr().err
