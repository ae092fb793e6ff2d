"""Single-pathway baselines: Direct, MedRAG (BM25) and online-only return the same Decision record."""

from __future__ import annotations

import dspy
import pytest

from clearmed.programs.baselines import SinglePathway
from clearmed.retrieval.memory import InMemoryRetriever, InMemoryWebSearch
from clearmed.signatures.records import Decision, Question
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import LOCAL, QUESTION, WEB, label_all, pathway_replies, scripted_lm

SETTINGS = ProgramSettings(json_fallback=False)


@pytest.mark.parametrize(
    ("name", "answer", "stages"),
    [
        ("direct", "A", ["parametric"]),
        ("medrag", "B", ["local_answer"]),
        ("online", "C", ["dynamic_answer", "source_quality"]),
    ],
)
def test_each_baseline_runs_only_its_pathway(name: str, answer: str, stages: list[str]) -> None:
    lm, engine = scripted_lm({**pathway_replies("A", "B", "C"), "source_quality": label_all("high")})
    program = SinglePathway(
        name,  # type: ignore[arg-type]
        InMemoryRetriever(LOCAL),
        InMemoryWebSearch(WEB),
        settings=SETTINGS,
        role_lms={"main": lm},
    )
    decision = program(question=QUESTION).decision
    assert decision.program == name
    assert decision.status == "answered"
    assert decision.letters == (answer,)
    assert decision.route is None
    assert decision.deciding_rule == "single_pathway"
    assert engine.stages() == stages
    assert Decision.model_validate_json(decision.model_dump_json()) == decision


def test_direct_unparseable_answer_is_unparsed_not_guessed() -> None:
    lm, _ = scripted_lm({"parametric": {"rationale": "r", "answer": "E"}, "format_gate": {"letters": "NONE"}})
    decision = SinglePathway("direct", settings=SETTINGS, role_lms={"main": lm})(question=QUESTION).decision
    assert decision.status == "unparsed"
    assert decision.answer is None


def test_direct_lm_failure_is_a_failed_decision() -> None:
    lm, _ = scripted_lm({"parametric": dspy.LMTransportError("connection refused")})
    decision = SinglePathway("direct", settings=SETTINGS, role_lms={"main": lm})(question=QUESTION).decision
    assert decision.status == "failed"
    assert decision.error is not None
    assert "connection refused" in decision.error


def test_medrag_without_a_corpus_fails_clearly() -> None:
    lm, _ = scripted_lm({})
    decision = SinglePathway("medrag", settings=SETTINGS, role_lms={"main": lm})(question=QUESTION).decision
    assert decision.status == "failed"
    assert decision.error == "no local corpus configured"


def test_free_text_baseline_generates_a_response() -> None:
    question = Question(id="f", text="What causes weight gain?", answer_mode="free_text")
    lm, _ = scripted_lm(
        {"parametric": {"rationale": "r", "answer": "Hypothyroidism"}, "response": {"response": "Hypothyroidism."}}
    )
    decision = SinglePathway("direct", settings=SETTINGS, role_lms={"main": lm})(question=question).decision
    assert decision.response == "Hypothyroidism."
