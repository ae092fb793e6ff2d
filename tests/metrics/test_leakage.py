"""Leakage audit: passages that reproduce a benchmark item are flagged; ordinary evidence is not."""

from __future__ import annotations

from clearmed.metrics import audit_leakage, passage_leak
from clearmed.signatures.records import Candidate, Decision, EvidenceBundle, Passage, Provenance
from clearmed.testing import QUESTION


def passage(pid: str, text: str) -> Passage:
    return Passage(id=pid, text=text, pathway="local", provenance=Provenance(kind="corpus", corpus="c", doc_id="d"))


def test_a_copied_question_stem_is_flagged() -> None:
    leak = passage_leak(QUESTION, passage("L1", "Quiz: " + QUESTION.text + " Answer below."))
    assert leak is not None
    assert leak.stem_overlap == 1.0
    assert "question stem" in leak.reasons[0]


def test_an_answer_key_with_several_options_is_flagged() -> None:
    text = "Options were Addison disease, Cushing syndrome and Hyperthyroidism; the key is Hypothyroidism."
    leak = passage_leak(QUESTION, passage("L1", text))
    assert leak is not None
    assert leak.options_verbatim >= 2
    assert leak.gold_verbatim is False  # "Hypothyroidism" is one word: too common to count as verbatim


def test_ordinary_textbook_evidence_is_not_flagged() -> None:
    text = "Hypothyroidism slows metabolism, which leads to weight gain and intolerance of cold temperatures."
    assert passage_leak(QUESTION, passage("L1", text)) is None


def test_audit_covers_every_passage_of_a_decision() -> None:
    bundle = EvidenceBundle(
        question=QUESTION,
        candidates=[Candidate(pathway="parametric")],
        local_passages=[passage("L1", QUESTION.text), passage("L2", "unrelated text about kidneys")],
    )
    decision = Decision(question_id=QUESTION.id, status="failed", bundle=bundle)
    report = audit_leakage(QUESTION, decision)
    assert report.flagged
    assert [leak.passage_id for leak in report.leaks] == ["L1"]
