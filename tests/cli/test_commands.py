"""The command line end to end, with the LM replaced by a scripted one (no model, no network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clearmed.api import assemble
from clearmed.api.ask import parse_options
from clearmed.cli.main import main
from clearmed.core.errors import UsageError
from clearmed.demo import demo_question
from clearmed.signatures.records import Decision
from clearmed.testing import ScriptedCall, label_all, scripted_lm, verifier_reply


def answer_a(call: ScriptedCall) -> dict[str, object]:
    cited = {"cited_ids": []} if "evidence" in call.user else {}
    return {"rationale": "because", **cited, "answer": "A"}


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch):
    lm, engine = scripted_lm(
        {
            "parametric": answer_a,
            "local_answer": answer_a,
            "dynamic_answer": answer_a,
            "source_quality": label_all("high"),
            "verifier": verifier_reply("consensus"),
            "response": {"response": "Levothyroxine replaces the missing hormone."},
        }
    )
    monkeypatch.setattr(assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm})
    return engine


def test_ask_demo_prints_the_trail(scripted, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "--demo", "demo-01"]) == 0
    out = capsys.readouterr().out
    assert "Answer:" in out
    assert demo_question("demo-01").options["A"] in out  # type: ignore[index]
    assert "consensus" in out
    assert "Adjudication trail" in out
    assert "demo-textbook" in out  # local provenance


def test_ask_json_is_a_decision(scripted, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "--demo", "1", "--json"]) == 0
    decision = Decision.model_validate_json(capsys.readouterr().out)
    assert decision.question_id == "demo-01"
    assert decision.letters == ("A",)
    assert len(decision.bundle.local_passages) == 4  # the embedded config's local_k


def test_ask_own_question_with_options(scripted, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["ask", "Which drug treats hypothyroidism?", "-o", "A: levothyroxine", "-o", "B: methimazole", "--json"]
    )
    assert code == 0
    decision = json.loads(capsys.readouterr().out)
    assert decision["bundle"]["question"]["options"] == {"A": "levothyroxine", "B": "methimazole"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["ask"], "give a question"),
        (["ask", "   "], "question text is empty"),
        (["ask", "Which?", "-o", "A: x"], "at least two --option"),
        (["ask", "Which?", "-o", "A: x", "-o", "A: y"], "option A is given twice"),
        (["ask", "Which?", "-o", "A: x", "-o", "B: x"], "same text"),
        (["ask", "--demo", "demo-99"], "no demo question"),
        (["ask", "--demo", "1", "Which?"], "--demo picks a demo question"),
        (["ask", "Which?", "--config", "nope"], "no such config"),
        (["eval", "--benchmark", "no-such-benchmark"], "no-such-benchmark"),
    ],
)
def test_bad_input_is_one_clear_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err
    assert err.startswith("clearmed: error:")


def test_parse_options_letters_and_plain_texts() -> None:
    assert parse_options(["A: x", "b) y", "C=z"]) == {"A": "x", "B": "y", "C": "z"}
    assert parse_options(["first", "second"]) == {"A": "first", "B": "second"}
    with pytest.raises(UsageError):
        parse_options(["A: x", "a: y"])


def test_eval_demo_then_compare(scripted, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    assert main(["eval", "--benchmark", "demo", "--limit", "4", "--run-dir", str(run_dir)]) == 0
    for name in ("manifest.json", "config.json", "results.jsonl", "summary.json", "summary.md", "leakage.json"):
        assert (run_dir / name).is_file(), name
    assert len((run_dir / "results.jsonl").read_text().splitlines()) == 4
    assert sorted(p.name for p in (run_dir / "plots").iterdir()) == ["accuracy.png", "cost_by_route.png", "routes.png"]
    capsys.readouterr()
    assert main(["compare", str(run_dir), str(run_dir), "--out", str(tmp_path / "cmp")]) == 0
    assert "| clear | demo |" in capsys.readouterr().out
    assert (tmp_path / "cmp" / "comparison.md").is_file()
    assert main(["compare", str(run_dir), str(run_dir), "--common"]) == 0
    shown = capsys.readouterr().out
    assert "On the questions clean in every run: demo 4." in shown
    label = f"{run_dir.parent.name}/run"  # the same folder name twice is qualified by its parent
    assert f"| {label} | {label} | 4 | " in shown  # the paired row: a run against itself gains and loses nothing
    assert main(["compare", str(tmp_path / "cmp")]) == 2
    assert "no manifest.json" in capsys.readouterr().err


def test_config_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "--list"]) == 0
    assert "embedded" in capsys.readouterr().out
    assert main(["config", "-c", "embedded"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["backbones"]["main"]["kind"] == "embedded"


def test_the_listings_and_choices_the_commands_show_are_whole(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`demo`, `config --list`, `benchmarks` and the choices of `eval`, `compile` and `tune` read the api, which reads
    the catalogs: every entry of each catalog reaches the user (none dropped on the way)."""
    from clearmed.benchmarks import QUESTIONS_FORMAT, available_benchmarks
    from clearmed.config import packaged_configs
    from clearmed.demo import demo_questions
    from clearmed.optimize.compiling import OPTIMIZERS
    from clearmed.optimize.tuning import DEFAULT_PARAMETERS, PARAMETERS
    from clearmed.programs.catalog import PROGRAMS

    monkeypatch.setenv("COLUMNS", "500")  # a table folds nothing

    def shown(argv: list[str]) -> str:
        if "--help" in argv:
            with pytest.raises(SystemExit, match=r"^0$"):
                main(argv)
        else:
            assert main(argv) == 0
        return " ".join(capsys.readouterr().out.split())

    listed = shown(["demo"])
    assert all(question.id in listed for question in demo_questions())
    listed = shown(["config", "--list"])
    assert all(f"{name} {path}" in listed for name, path in packaged_configs().items())
    listed = shown(["benchmarks"])
    assert all(f"│ {info.name} │" in listed for info in available_benchmarks())  # each one's own row
    assert " ".join(QUESTIONS_FORMAT.split()) in listed
    for command in ("eval", "compile"):
        assert "{" + ",".join(sorted(PROGRAMS)) + "}" in shown([command, "--help"]).replace(" ", "")
    assert "{" + ",".join(OPTIMIZERS) + "}" in shown(["compile", "--help"]).replace(" ", "")
    helped = shown(["tune", "--help"])
    assert all(name in helped for name in [*PARAMETERS, *DEFAULT_PARAMETERS])
