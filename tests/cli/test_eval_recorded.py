"""`clearmed eval --pathway NAME=SOURCE`: CLEAR adjudicates recorded pathways (MIRAGE's layout here), calls the LM
only where they disagree, writes a normal run folder that resumes, and imports the recordings as Direct / MedRAG runs
that `clearmed compare` pairs it with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clearmed.api import assemble
from clearmed.backbones.client import ClearmedLM
from clearmed.cli.main import main
from clearmed.evaluation import read_records
from clearmed.testing import ScriptedEngine, _AsyncScriptedEngine, demo_config_toml, verifier_reply

OPTIONS = {"A": "Cortisol", "B": "Insulin", "C": "Thyroxine", "D": "Aldosterone"}
GOLD = ["A", "B", "C", "D"]
# question i: CoT answers COT[i], MedRAG answers RAG[i]; they agree on 0 and 1, disagree on 2 and 3
COT = ["A", "B", "C", "A"]
RAG = ["A", "B", "B", "D"]


def _reply(letter: str) -> list[str]:
    return [json.dumps({"step_by_step_thinking": f"so {letter}", "answer_choice": letter})]


@pytest.fixture
def mirage(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "mirage"
    questions = {
        f"{i:04d}": {"question": f"Question {i}?", "options": OPTIONS, "answer": g} for i, g in enumerate(GOLD)
    }
    root.mkdir()
    (root / "benchmark.json").write_text(json.dumps({"medqa": questions}), encoding="utf-8")
    folders = {
        "cot": root / "prediction/medqa/cot/OpenAI/gpt-4-32k",
        "rag": root / "prediction/medqa/rag_32/OpenAI/gpt-4-32k/medcorp/RRF-4",
    }
    for name, letters in (("cot", COT), ("rag", RAG)):
        folders[name].mkdir(parents=True)
        for i, letter in enumerate(letters):
            (folders[name] / f"test_{i:04d}.json").write_text(json.dumps(_reply(letter)), encoding="utf-8")
    return {"benchmark": root / "benchmark.json", **folders}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "remote.toml"
    path.write_text(demo_config_toml(run=f'runs_dir = "{tmp_path / "runs"}"'), encoding="utf-8")
    return path


def scripted(monkeypatch: pytest.MonkeyPatch, script: dict[str, Any]) -> ScriptedEngine:
    engine = ScriptedEngine(script=dict(script))
    lm = ClearmedLM(
        "local/scripted",
        service="main backbone m",
        engine=engine,
        async_engine=_AsyncScriptedEngine(engine),
        cache=False,
    )
    monkeypatch.setattr(assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm})
    return engine


def _eval(config: Path, mirage: dict[str, Path], run_dir: Path, program: str, *pathways: str) -> int:
    argv = ["eval", "--program", program, "--benchmark", "mirage-medqa", "--source", str(mirage["benchmark"])]
    argv += ["-c", str(config), "--run-dir", str(run_dir)]
    for item in pathways:
        argv += ["--pathway", item]
    return main(argv)


def test_clear_over_recorded_pathways_calls_the_lm_only_where_they_disagree(
    monkeypatch: pytest.MonkeyPatch, config: Path, mirage: dict[str, Path], tmp_path: Path
) -> None:
    engine = scripted(monkeypatch, {"verifier": verifier_reply("keep_local", answer="B")})
    run_dir = tmp_path / "clear"
    recorded = (f"parametric={mirage['cot']}", f"local={mirage['rag']}", "dynamic=absent")
    assert _eval(config, mirage, run_dir, "clear", *recorded) == 0
    # no pathway stage ran: only the verifier, once for each of the two disagreements
    assert engine.stages() == ["verifier", "verifier"]
    records = {r.question_id: r for r in read_records(run_dir)}
    agreed = records["mirage:medqa:0000"].decision
    assert agreed.deciding_rule == "run_pathways_agree"
    assert agreed.route == "consensus"
    assert agreed.lm_calls() == 0
    disputed = records["mirage:medqa:0002"].decision
    assert disputed.route == "keep_local"
    assert disputed.letters == ("B",)
    parametric = disputed.bundle.candidate("parametric")
    assert parametric.model == "OpenAI/gpt-4-32k"
    assert parametric.rationale == "so C"
    assert parametric.recorded_from is not None
    assert parametric.recorded_from.endswith("cot/OpenAI/gpt-4-32k/test_0002.json")
    dynamic = disputed.bundle.candidate("dynamic")
    assert dynamic.error is not None
    assert dynamic.error.kind == "not_run"
    assert not any(r.degraded for r in records.values())  # a pathway left out by choice is not a failure
    assert (run_dir / "summary.json").is_file()
    # the question page shows where the recorded answer came from, beside its rationale
    pages = "".join(p.read_text(encoding="utf-8") for p in (run_dir / "report").rglob("q/*.html"))
    assert "recorded: OpenAI/gpt-4-32k" in pages
    assert "test_0002.json" in pages
    # the pathway left out has no accuracy of its own (not a 0% one) in the summary or the report's overview
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert set(summary["pathways"]["pathway_accuracy"]) == {"parametric", "local"}
    assert "not run</td>" in (run_dir / "report" / "index.html").read_text(encoding="utf-8")

    # resume: every question is done, so nothing is asked again
    engine.calls.clear()
    assert _eval(config, mirage, run_dir, "clear", *recorded) == 0
    assert engine.stages() == []


def test_a_resume_with_other_recorded_pathways_is_refused(
    monkeypatch: pytest.MonkeyPatch,
    config: Path,
    mirage: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    scripted(monkeypatch, {"verifier": verifier_reply("keep_local", answer="B")})
    run_dir = tmp_path / "clear"
    assert _eval(config, mirage, run_dir, "clear", f"parametric={mirage['cot']}", f"local={mirage['rag']}") != 2
    capsys.readouterr()
    assert _eval(config, mirage, run_dir, "clear", f"parametric={mirage['rag']}", f"local={mirage['cot']}") == 2
    err = capsys.readouterr().err
    assert "holds a different run" in err
    assert "recorded pathways" in err


def test_recorded_pathways_import_as_direct_and_medrag_runs_that_compare_pairs(
    monkeypatch: pytest.MonkeyPatch,
    config: Path,
    mirage: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine = scripted(monkeypatch, {"verifier": verifier_reply("keep_local", answer="B")})
    assert _eval(config, mirage, tmp_path / "direct", "direct", f"parametric={mirage['cot']}") == 0
    assert _eval(config, mirage, tmp_path / "medrag", "medrag", f"local={mirage['rag']}") == 0
    assert engine.stages() == []
    direct = {r.question_id: r.decision.letters for r in read_records(tmp_path / "direct")}
    assert [direct[f"mirage:medqa:{i:04d}"] for i in range(4)] == [(letter,) for letter in COT]
    clear = (f"parametric={mirage['cot']}", f"local={mirage['rag']}", "dynamic=absent")
    assert _eval(config, mirage, tmp_path / "clear", "clear", *clear) == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "clear"), str(tmp_path / "direct"), str(tmp_path / "medrag")]) == 0
    out = capsys.readouterr().out
    assert "direct" in out
    assert "medrag" in out


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("parametric", "give NAME=SOURCE"),
        ("verifier=/x", "give NAME=SOURCE"),
        ("local=/no/such/folder", "--pathway local: /no/such/folder: no such folder"),
    ],
)
def test_a_bad_pathway_option_is_one_line(
    config: Path, mirage: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], item: str, message: str
) -> None:
    assert _eval(config, mirage, tmp_path / "run", "clear", item) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1


def test_a_baseline_takes_only_its_own_pathway(
    config: Path, mirage: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _eval(config, mirage, tmp_path / "run", "direct", f"local={mirage['rag']}") == 2
    assert "direct runs the parametric pathway alone" in capsys.readouterr().err
