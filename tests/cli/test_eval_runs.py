"""`clearmed eval` against failing and costly services: a fatal error is one line and exit 2, a budget stops the run with
exit 3, both resume with the same command; `--estimate` prints what a run will take before anything is spent."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from dspy import lm15

from clearmed.api import assemble
from clearmed.backbones.client import ClearmedLM
from clearmed.cli.main import main
from clearmed.evaluation import read_records
from clearmed.testing import (
    UNREACHABLE_BACKBONE,
    ScriptedCall,
    ScriptedEngine,
    _AsyncScriptedEngine,
    demo_config_toml,
    label_all,
    verifier_reply,
)


def answer_a(call: ScriptedCall) -> dict[str, object]:
    cited = {"cited_ids": []} if "evidence" in call.user else {}
    return {"rationale": "because", **cited, "answer": "A"}


SCRIPT: dict[str, Any] = {
    "parametric": answer_a,
    "local_answer": answer_a,
    "dynamic_answer": answer_a,
    "source_quality": label_all("high"),
    "verifier": verifier_reply("consensus"),
}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A remote backbone at $1,000/$2,000 per million tokens over the demo bundle's textbook and pages."""
    path = tmp_path / "remote.toml"
    path.write_text(
        demo_config_toml(
            backbone=UNREACHABLE_BACKBONE + "\nprice = { input = 1000.0, output = 2000.0 }",
            program="json_fallback = false",
            run=f'runs_dir = "{tmp_path / "runs"}"',
        ),
        encoding="utf-8",
    )
    return path


def scripted(monkeypatch: pytest.MonkeyPatch, script: dict[str, Any]) -> ScriptedEngine:
    engine = ScriptedEngine(script=dict(script))
    lm = ClearmedLM(
        "local/scripted",
        service="main backbone m",
        engine=engine,
        async_engine=_AsyncScriptedEngine(engine),
        cache=False,
        num_retries=0,
    )
    monkeypatch.setattr(assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm})
    return engine


def revoked_after(questions: int):
    """The parametric stage answers for `questions` questions, then the key is rejected."""
    count = itertools.count()
    refused = lm15.AuthError("Incorrect API key provided: sk-proj-0123456789abcdefghijklmnop", status=401)

    def answer(call: ScriptedCall) -> object:
        return answer_a(call) if next(count) < questions else refused

    return answer


def eval_args(config: Path, run_dir: Path, *extra: str) -> list[str]:
    return ["eval", "--benchmark", "demo", "--limit", "5", "-c", str(config), "--run-dir", str(run_dir), *extra]


def test_a_rejected_key_stops_the_run_with_one_line_and_exit_2_and_it_resumes(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    scripted(monkeypatch, {**SCRIPT, "parametric": revoked_after(2)})
    assert main(eval_args(config, run_dir)) == 2
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("clearmed:")]
    assert len(lines) == 1
    assert lines[0].startswith("clearmed: error: main backbone m: authentication failed (HTTP 401): Incorrect API key")
    assert lines[0].endswith("the run stopped (resume with the same command once that is mended)")
    assert "sk-proj" not in out + err
    assert "Traceback" not in err
    assert len(list(read_records(run_dir))) == 2  # nothing for the question that met the error, nor after it
    assert not (run_dir / "summary.json").exists()
    scripted(monkeypatch, SCRIPT)  # the key is mended
    assert main(eval_args(config, run_dir)) == 0
    assert len(list(read_records(run_dir))) == 5
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["evaluated"], summary["degraded"]) == (5, 0)


def test_max_cost_stops_the_run_with_exit_3_and_a_higher_budget_resumes_it(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    scripted(monkeypatch, SCRIPT)
    assert main(eval_args(config, run_dir, "--max-cost", "0.01")) == 3  # the first question takes it past
    err = capsys.readouterr().err
    assert "clearmed: budget reached: spent $" in err
    assert "4 questions not started" in err
    summary = json.loads((run_dir / "summary.json").read_text())  # what was done is summarized
    assert (summary["evaluated"], summary["planned"]) == (1, 5)
    assert summary["spend"]["usd"] > 0.01
    for name in ("summary.md", "leakage.json", "plots/accuracy.png", "report/index.html"):  # as the API leaves it
        assert (run_dir / name).is_file(), name
    # [run] max_cost is the default budget; --max-cost overrides it
    config.write_text(config.read_text().replace("[run]\n", "[run]\nmax_cost = 0.01\n"), encoding="utf-8")
    assert main(eval_args(config, run_dir)) == 3
    assert main(eval_args(config, run_dir, "--max-cost", "1000")) == 0
    assert len(list(read_records(run_dir))) == 5
    assert main(eval_args(config, run_dir, "--max-cost", "-1")) == 2
    assert "--max-cost" in capsys.readouterr().err


def test_estimate_from_stored_runs_and_from_a_pilot(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = scripted(monkeypatch, SCRIPT)
    run_dir = tmp_path / "runs" / "remote" / "demo" / "clear-n5-s0"  # the default folder under runs_dir
    # nothing stored yet: one line pointing at a pilot
    assert main(["eval", "--benchmark", "demo", "--limit", "5", "-c", str(config), "--estimate"]) == 2
    assert "add --pilot 5" in capsys.readouterr().err
    # a pilot: the first two questions of the run itself, then the estimate for the other three
    code = main(["eval", "--benchmark", "demo", "--limit", "5", "-c", str(config), "--estimate", "--pilot", "2"])
    assert code == 0
    out = capsys.readouterr().out
    assert "estimate for 3 questions of demo at 1 thread, from 2 questions of" in out
    assert "LM calls" in out
    assert "LM dollars      $" in out
    assert len(list(read_records(run_dir))) == 2
    # from stored runs: nothing is run, and another thread count only changes the wall time
    engine.calls.clear()
    code = main(["eval", "--benchmark", "demo", "--limit", "5", "-c", str(config), "--estimate", "--threads", "8"])
    assert code == 0
    assert engine.calls == []
    shown = capsys.readouterr().out
    assert "estimate for 3 questions of demo at 8 threads" in shown
    assert main(["eval", "--benchmark", "demo", "--limit", "5", "-c", str(config), "--pilot", "2"]) == 2


@pytest.mark.parametrize("name", ["o3-mini", "qwen3.5-9b-vllm"])
def test_the_remote_configs_run_questions_concurrently_and_pathways_in_parallel(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clearmed.backbones.factory import build_lm
    from clearmed.config import load_config
    from clearmed.programs.clear import CLEAR
    from clearmed.programs.lm.context import RunContext
    from clearmed.retrieval.memory import InMemoryRetriever, InMemoryWebSearch
    from clearmed.testing import LOCAL, WEB

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    config = load_config(name)
    assert config.run.num_threads == 8  # `clearmed eval` runs eight questions at once unless --threads says otherwise
    lm = build_lm(config.backbones["main"])
    program = CLEAR(InMemoryRetriever(LOCAL), InMemoryWebSearch(WEB), settings=config.program, role_lms={"main": lm})
    assert program._parallel(RunContext(settings=config.program, role_lms={"main": lm}))  # the three pathways at once
