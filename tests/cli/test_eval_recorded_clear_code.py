"""`clearmed eval --pathway NAME=<the CLEAR code's results.jsonl>`: CLEAR adjudicates the CLEAR code's direct, bm25 and
online runs, shows their evidence and provenance in the trail, calls the LM only where they disagree, and resumes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clearmed.cli.main import main
from clearmed.evaluation import read_records
from clearmed.testing import demo_config_toml, verifier_reply
from tests.cli.test_eval_recorded import scripted

OPTIONS = {"A": "Cortisol", "B": "Insulin", "C": "Thyroxine", "D": "Aldosterone"}
GOLD = ["A", "B", "B", "C"]
# question i: direct, bm25 and online answered these
ANSWERS = {"direct": ["A", "A", "C", "C"], "bm25": ["A", "B", "B", "C"], "online": ["A", "B", "A", "C"]}


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=True) + "\n" for row in rows), encoding="utf-8")
    return path


def _rows(method: str) -> list[dict[str, Any]]:
    rows = []
    for i, pred in enumerate(ANSWERS[method]):
        trace: dict[str, Any] = {"method": "online_search" if method == "online" else method, "model": "o3-mini"}
        row: dict[str, Any] = {"id": str(i), "pred": pred, "gold": GOLD[i], "raw_response": f"{method} says {pred}"}
        if method == "bm25":
            trace["retrieved_docs"] = [
                {"id": f"pubmed_{i}", "corpus": "pubmed", "title": "Adrenal", "score": 3.5, "content": f"doc {i}"}
            ]
        if method == "online":
            trace["search_provider"] = "tavily"
            row["evidence"] = {"sources": [{"title": "NIH", "url": f"https://www.nih.gov/{i}", "claim": f"fact {i}"}]}
        rows.append(row | {"trace": trace})
    return rows


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Path]:
    questions = [
        {"realidx": str(i), "question": f"Question {i}?", "options": OPTIONS, "answer_idx": g, "answer": OPTIONS[g]}
        for i, g in enumerate(GOLD)
    ]
    bench = _write(tmp_path / "medqa" / "test.jsonl", questions)
    config = tmp_path / "remote.toml"
    config.write_text(demo_config_toml(run=f'runs_dir = "{tmp_path / "runs"}"'), encoding="utf-8")
    runs = tmp_path / "clear_code_runs"
    return {
        "benchmark": bench,
        "config": config,
        "direct": _write(runs / "2025-01-01_direct_medqa_test_full_o3-mini" / "results.jsonl", _rows("direct")),
        "bm25": _write(runs / "2025-01-01_bm25_medqa_test_full_o3-mini" / "results.jsonl", _rows("bm25")).parent,
        "online": _write(runs / "2025-01-01_online_medqa_test_full_o3-mini" / "results.jsonl", _rows("online")),
    }


def _eval(setup: dict[str, Path], run_dir: Path, *extra: str) -> int:
    argv = ["eval", "--program", "clear", "--benchmark", "medqa", "--source", str(setup["benchmark"])]
    argv += ["-c", str(setup["config"]), "--run-dir", str(run_dir), *extra]
    argv += ["--pathway", f"parametric={setup['direct']}", "--pathway", f"local={setup['bm25']}"]
    return main([*argv, "--pathway", f"dynamic={setup['online']}"])


def test_clear_adjudicates_the_clear_codes_runs_with_their_evidence_and_resumes(
    monkeypatch: pytest.MonkeyPatch, setup: dict[str, Path], tmp_path: Path
) -> None:
    engine = scripted(monkeypatch, {"verifier": verifier_reply("keep_local", answer="B")})
    run_dir = tmp_path / "clear"
    assert _eval(setup, run_dir, "--stop-after", "1") == 0  # killed after one question, say
    assert engine.stages() == ["verifier"]
    assert _eval(setup, run_dir) == 0
    # no pathway stage ran; the verifier decided each question once (all three pathways ran, so no fast path),
    # the resumed run only the three not done
    assert engine.stages() == ["verifier"] * 4
    records = {r.question_id: r for r in read_records(run_dir)}
    assert sorted(records) == [f"medqa:test:{i}" for i in range(4)]
    disputed = records["medqa:test:2"].decision
    assert disputed.route == "keep_local"
    assert disputed.letters == ("B",)
    bundle = disputed.bundle
    local = bundle.candidate("local")
    assert local.model == "o3-mini"
    assert local.rationale == "bm25 says B"
    assert local.recorded_from == f"{setup['bm25'] / 'results.jsonl'} id=2"
    assert [p.provenance.doc_id for p in bundle.local_passages] == ["pubmed_2"]
    assert [p.provenance.url for p in bundle.dynamic_passages] == ["https://www.nih.gov/2"]
    assert bundle.dynamic_passages[0].quality is not None  # labelled without an LM call
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["recorded_pathways"]["parametric"] == str(setup["direct"].resolve())
    # the question page shows the recorded evidence and where it came from
    pages = "".join(p.read_text(encoding="utf-8") for p in (run_dir / "report").rglob("q/*.html"))
    assert "recorded: o3-mini" in pages
    assert "https://www.nih.gov/2" in pages

    engine.calls.clear()
    assert _eval(setup, run_dir) == 0  # resumed with every question done: nothing is asked again
    assert engine.stages() == []
