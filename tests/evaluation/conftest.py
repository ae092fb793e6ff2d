"""Fixtures for the HTML report tests (test_html_report*.py). Run folders: two synthetic CLEAR runs that differ on a few questions, and a run whose
evidence attacks the page (the reliability suite's adversarial pages plus HTML and script planted in every field
a run records)."""

from __future__ import annotations

import importlib.util
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest

from clearmed.evaluation import EvalRecord, RunManifest
from clearmed.metrics import score_decision
from clearmed.retrieval.memory import web_passage
from clearmed.signatures.records import Decision, Provenance, Thresholds
from clearmed.testing.synthetic_run import write_synthetic_run

# A variant that is stricter about overriding: on the 16 synthetic questions it gains one and loses two.
STRICT = Thresholds(guard_min_high=3, audit_min_high=2)
SCRIPT = "<script>document.body.setAttribute('data-pwned', 'script')</script>"
IMG = "<img src=x onerror=\"document.body.setAttribute('data-pwned', 'img')\">"
HOSTILE_TEXT = f"Weight gain and cold intolerance. {SCRIPT} {IMG} </div></main><a href='javascript:alert(1)'>click</a>"
HOSTILE_URL = "javascript:document.body.setAttribute('data-pwned','link')"
ROOT = Path(__file__).resolve().parents[1]


def synthetic_pair(base: Path, n: int = 16) -> tuple[Path, Path]:
    """Two runs of the synthetic benchmark: the paper's thresholds, then the stricter variant."""
    write_synthetic_run(base / "paper", n=n)
    write_synthetic_run(base / "strict", n=n, thresholds=STRICT)
    return base / "paper", base / "strict"


def adversarial_module() -> ModuleType:
    """The reliability suite's adversarial evidence (pages and the gullible model), loaded by path."""
    path = ROOT / "reliability" / "test_adversarial_evidence.py"
    spec = importlib.util.spec_from_file_location("adversarial_evidence_fixture", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


def _with_html_everywhere(decision: Decision) -> Decision:
    """HTML and script in the question, a pathway's rationale, the verifier's rationale, a page's title, text and
    address, and the decision's rationale."""
    bundle = decision.bundle
    question = bundle.question.model_copy(update={"text": f"<b>Bold?</b> {bundle.question.text} {SCRIPT}"})
    hostile = web_passage("X1", "https://example.com/x", f"</title>{SCRIPT}", HOSTILE_TEXT).model_copy(
        update={"provenance": Provenance(kind="web", url=HOSTILE_URL, domain="example.com")}
    )
    candidates = [
        c.model_copy(update={"rationale": f"{c.rationale} {IMG}", "cited_passage_ids": [*c.cited_passage_ids, "X1"]})
        for c in bundle.candidates
    ]
    bundle = bundle.model_copy(
        update={"question": question, "candidates": candidates, "dynamic_passages": [*bundle.dynamic_passages, hostile]}
    )
    return decision.model_copy(update={"bundle": bundle, "rationale": f"{decision.rationale} {SCRIPT}"})


def hostile_run(folder: Path) -> Path:
    """A run folder of decisions made on the adversarial pages, one with HTML planted in every field."""
    adversarial = adversarial_module()
    decisions = []
    # Pages the evidence screen quarantines: an instruction to the model, prompt markers, look-alike domains.
    chosen = [
        name for name in sorted(adversarial.ATTACKS) if re.search(r"instruction on|impersonat|look-alike domains", name)
    ]
    assert chosen, "the reliability suite's attack names changed"
    for attack in chosen:
        decision, _ = adversarial.run(
            [*adversarial.HONEST, *adversarial.ATTACKS[attack]], adversarial.HONEST, verifier="gullible"
        )
        decisions.append(decision)
    decisions.append(_with_html_everywhere(decisions[0]))
    renamed = []
    for index, decision in enumerate(decisions):
        qid = f"adv-{index}"
        question = decision.bundle.question.model_copy(update={"id": qid})
        renamed.append(
            decision.model_copy(
                update={"question_id": qid, "bundle": decision.bundle.model_copy(update={"question": question})}
            )
        )
    return write_run_folder(
        folder, renamed, program="clear", benchmark="adversarial", source="reliability suite", seconds=1.5
    )


def write_run_folder(
    folder: Path, decisions: list[Decision], *, program: str, benchmark: str, source: str, seconds: float
) -> Path:
    """A finished-looking run folder (manifest and results) of these decisions, MCQ ones scored."""
    folder.mkdir(parents=True)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    records = [
        EvalRecord(
            question_id=d.question_id,
            index=i,
            program=program,
            decision=d,
            score=score_decision(d.bundle.question, d) if d.bundle.question.is_mcq else None,
            seconds=seconds,
            finished=now,
        )
        for i, d in enumerate(decisions)
    ]
    manifest = RunManifest(
        program=program,
        benchmark=benchmark,
        source=source,
        config_source="test.toml",
        config_digest="0" * 16,
        question_ids=[r.question_id for r in records],
        created=now,
        clearmed_version="test",
    )
    (folder / "manifest.json").write_text(manifest.model_dump_json(indent=2))
    (folder / "results.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))
    return folder


@pytest.fixture(scope="session")
def report_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The runs (paper, strict: one synthetic benchmark; hostile: the adversarial one), built once per session."""
    base = tmp_path_factory.mktemp("report-runs")
    paper, strict = synthetic_pair(base)
    return {"paper": paper, "strict": strict, "hostile": hostile_run(base / "hostile")}


@pytest.fixture(scope="session")
def report_dir(report_runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One report of all three runs (written once: the tests only read it)."""
    from clearmed.report.html_report import write_html_report

    out = tmp_path_factory.mktemp("report") / "report"
    write_html_report([report_runs["paper"], report_runs["strict"], report_runs["hostile"]], out)
    return out
