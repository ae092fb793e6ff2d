"""docs/experiments/recorded_headroom.py: both scoring conventions side by side, refusal recoveries counted apart,
and docs/experiments/eval_mirage_recorded.sh printing the deterministic report before the LM run (issue 46)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from clearmed.evaluation.store import EvalRecord
from clearmed.metrics import score_decision
from clearmed.signatures.records import Answer, Decision, EvidenceBundle, Question

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = {"A": "a", "B": "b", "C": "c", "D": "d"}


def headroom() -> ModuleType:
    spec = importlib.util.spec_from_file_location("recorded_headroom", ROOT / "docs/experiments/recorded_headroom.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def record(qid: str, gold: str, letter: str | None) -> EvalRecord:
    question = Question(id=qid, text="Q?", options=OPTIONS, gold_letters=[gold])
    bundle = EvidenceBundle(question=question, candidates=[])
    if letter is None:
        decision = Decision(question_id=qid, status="failed", bundle=bundle, error="the reply named no option")
    else:
        decision = Decision(question_id=qid, status="answered", answer=Answer.of_letters(letter), bundle=bundle)
    return EvalRecord(
        question_id=qid,
        index=0,
        program="p",
        decision=decision,
        score=score_decision(question, decision),
        seconds=0.0,
        finished="now",
    )


def test_both_conventions_and_the_refusal_recoveries() -> None:
    # q1: gold A, CoT refused, CLEAR took MedRAG's B. q2: gold C, CoT refused, CLEAR took MedRAG's C.
    clear = [record("q1", "A", "B"), record("q2", "C", "C")]
    cot = [record("q1", "A", None), record("q2", "C", None)]
    rag = [record("q1", "A", "B"), record("q2", "C", "C")]
    lines = headroom().report(clear, cot, rag)
    table = {line.split()[0]: line.split()[1:4] for line in lines if line.startswith(("clearmed ", "mirage "))}
    # clearmed: a refusal is wrong; MIRAGE's evaluate.py reads it as "A", right on q1.
    assert table == {"clearmed": ["50.0", "0.0", "50.0"], "mirage": ["50.0", "50.0", "50.0"]}
    against_cot = next(line for line in lines if line.startswith("against CoT"))
    assert "clearmed: gained 1 (1 where CoT gave no answer), lost 0" in against_cot
    assert "mirage: gained 1 (1 where CoT gave no answer), lost 1" in against_cot


def test_the_mirage_script_reports_the_deterministic_verifier_before_the_lm_run() -> None:
    lines = (ROOT / "docs/experiments/eval_mirage_recorded.sh").read_text(encoding="utf-8").splitlines()
    heuristic_report = next(i for i, line in enumerate(lines) if "recorded_headroom.py" in line and "heuristic" in line)
    lm_run = next(i for i, line in enumerate(lines) if "--program clear " in line)
    assert heuristic_report < lm_run
