"""The option-wise judge's pure rules: verdict parsing, citation validation, the decision table, answers, graphs."""

from __future__ import annotations

import pytest

from clearmed.programs.adjudication.rules import option_support
from clearmed.programs.judge.graph import clean_graph, normalise_group
from clearmed.programs.judge.salvage import parse_verdict_lines, raw_sections
from clearmed.programs.judge.verdicts import (
    answer_from_verdicts,
    cited_ids,
    decide,
    judge,
    normalise_letter,
    normalise_verdict,
    validate_verdicts,
)
from clearmed.signatures.option_judge import EntityDraft, RelationDraft, VerdictDraft
from clearmed.signatures.records import Answer, GraphEntity, KnowledgeGraph, OptionVerdict, Question

Q = Question(
    id="q",
    text="Which drug treats X?",
    options={"A": "alpha", "B": "beta", "C": "gamma", "D": "delta"},
    gold_letters=["B"],
)
MULTI = Q.model_copy(update={"answer_mode": "multi", "gold_letters": ["A", "C"]})
EVIDENCE = {"L1", "L2", "L3"}


def v(option: str, verdict: str, *evidence: str) -> VerdictDraft:
    return VerdictDraft(option=option, verdict=verdict, evidence=list(evidence))


def ov(letter: str, verdict: str) -> OptionVerdict:
    return OptionVerdict(letter=letter, verdict=verdict)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("supported", "supported"),
        ("SUPPORTED", "supported"),
        ("**Supported.**", "supported"),
        ("Contradicted: the text rules it out", "contradicted"),
        ("refuted", "contradicted"),
        ("insufficient", "insufficient"),
        ("not enough evidence", "insufficient"),
        ("maybe", None),
        ("", None),
    ],
)
def test_verdict_labels_are_normalised(text: str, expected: str | None) -> None:
    assert normalise_verdict(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"), [("A", "A"), ("b)", "B"), ("Option C", "C"), ("(D) delta", "D"), ("E", None), ("AB", None)]
)
def test_option_letters_are_normalised(text: str, expected: str | None) -> None:
    assert normalise_letter(text, Q.letters) == expected


def test_citation_lists_are_tolerant() -> None:
    assert cited_ids(["[L1]", "l2, W3 (cdc.gov)", "L1", "F1.2"]) == ["L1", "L2", "W3", "F1.2"]


# ------------------------------------------------------------------------------------------- citation validation


def test_valid_verdicts_keep_their_labels_and_citations() -> None:
    verdicts, invalid, missing = validate_verdicts(
        [v("A", "contradicted", "L1"), v("B", "supported", "L2", "L3"), v("C", "insufficient"), v("D", "insufficient")],
        Q,
        EVIDENCE,
    )
    assert [x.verdict for x in verdicts] == ["contradicted", "supported", "insufficient", "insufficient"]
    assert verdicts[1].cited_ids == ["L2", "L3"]
    assert all(x.valid for x in verdicts)
    assert (invalid, missing) == (0, [])


def test_supported_verdict_citing_nothing_is_invalid_and_insufficient() -> None:
    verdicts, _, _ = validate_verdicts([v("B", "supported")], Q, EVIDENCE)
    b = verdicts[1]
    assert b.verdict == "insufficient"
    assert b.stated == "supported"
    assert b.invalid_reason == "cites no evidence"


def test_citing_an_id_outside_the_evidence_is_invalid_and_counted() -> None:
    verdicts, invalid, _ = validate_verdicts(
        [v("B", "supported", "L2", "L9"), v("A", "contradicted", "W4")], Q, EVIDENCE
    )
    assert verdicts[1].verdict == "insufficient"
    assert "L9" in (verdicts[1].invalid_reason or "")
    assert verdicts[0].verdict == "insufficient"
    assert invalid == 2


def test_unrecognised_label_is_invalid() -> None:
    verdicts, _, _ = validate_verdicts([v("A", "probably", "L1")], Q, EVIDENCE)
    assert verdicts[0].verdict == "insufficient"
    assert "unrecognised" in (verdicts[0].invalid_reason or "")


def test_missing_options_are_insufficient_and_listed_and_duplicates_ignored() -> None:
    verdicts, _, missing = validate_verdicts(
        [v("A", "supported", "L1"), v("A", "contradicted", "L2"), v("Z", "supported", "L1")], Q, EVIDENCE
    )
    assert verdicts[0].verdict == "supported"  # the first verdict for A stands
    assert missing == ["B", "C", "D"]
    assert [x.letter for x in verdicts] == ["A", "B", "C", "D"]


def test_graph_elements_resolve_to_the_passages_they_cite() -> None:
    graph = KnowledgeGraph(entities=[GraphEntity(id="E1", name="beta", type="CHEM", evidence=["L3"])])
    verdicts, invalid, _ = validate_verdicts([v("B", "supported", "E1")], Q, EVIDENCE, graph)
    assert verdicts[1].verdict == "supported"
    assert verdicts[1].cited_ids == ["L3"]
    assert invalid == 0


# ------------------------------------------------------------------------------------------- the decision table


@pytest.mark.parametrize(
    ("labels", "decision"),
    [
        (["supported", "insufficient", "insufficient", "insufficient"], "grounded"),
        (["supported", "contradicted", "insufficient", "insufficient"], "grounded"),
        (["supported", "supported", "contradicted", "contradicted"], "grounded"),
        (["contradicted", "insufficient", "insufficient", "insufficient"], "elimination"),
        (["contradicted", "contradicted", "contradicted", "insufficient"], "elimination"),
        (["insufficient", "insufficient", "insufficient", "insufficient"], "parametric"),
    ],
)
def test_decision_follows_from_verdicts(labels: list[str], decision: str) -> None:
    assert decide([ov(letter, label) for letter, label in zip("ABCD", labels, strict=True)]) == decision


def _answer(labels: str, decision: str, model: str | None, question: Question = Q) -> tuple[str | None, str]:
    names = {"s": "supported", "c": "contradicted", "i": "insufficient"}
    verdicts = [ov(letter, names[label]) for letter, label in zip("ABCD", labels, strict=True)]
    answer, rule = answer_from_verdicts(question, verdicts, decision, model)  # type: ignore[arg-type]
    return (answer.display() if answer else None), rule


@pytest.mark.parametrize(
    ("labels", "decision", "model", "expected"),
    [
        ("isii", "grounded", "B", "B"),  # the model's answer is the supported option
        ("isii", "grounded", "C", "B"),  # the model disagrees with its own verdicts: the supported option wins
        ("isii", "grounded", None, "B"),
        ("ssii", "grounded", "A", "A"),
        ("ssii", "grounded", "C", None),  # two supported, answer names neither: no guess
        ("ciii", "elimination", "B", "B"),
        ("ciii", "elimination", "A", None),  # answered an option it ruled out
        ("ccci", "elimination", None, "D"),  # one option left
        ("cccc", "elimination", "A", None),
        ("iiii", "parametric", "C", "C"),
        ("iiii", "parametric", "no idea", None),
    ],
)
def test_answer_follows_the_decision(labels: str, decision: str, model: str | None, expected: str | None) -> None:
    assert _answer(labels, decision, model)[0] == expected


def test_multi_answer_takes_every_supported_option() -> None:
    assert _answer("sisi", "grounded", "A", MULTI)[0] == "A,C"


def test_judge_records_model_decision_but_uses_the_rule() -> None:
    judgment = judge(
        Q,
        [v("A", "contradicted", "L1"), v("B", "insufficient"), v("C", "insufficient"), v("D", "insufficient")],
        EVIDENCE,
        stated_decision="grounded",
        model_answer="B",
    )
    assert judgment.decision == "elimination"
    assert judgment.stated_decision == "grounded"
    assert judgment.eliminated == ["A"]
    assert judgment.answer == Answer.of_letters("B")
    assert judgment.mode == "implicit"


def test_option_support_is_the_exact_option_condition() -> None:
    judgment = judge(
        Q, [v("B", "supported", "L1"), v("C", "contradicted", "L2")], EVIDENCE, stated_decision=None, model_answer="B"
    )
    assert option_support(judgment, Answer.of_letters("B")) is True
    assert option_support(judgment, Answer.of_letters("C")) is False
    assert option_support(judgment, Answer.of_letters("A")) is False
    assert option_support(None, Answer.of_letters("B")) is None


# ------------------------------------------------------------------------------------------- the graph


def test_graph_types_are_normalised_to_the_15_groups() -> None:
    assert normalise_group("DISO") == ("DISO", False)
    assert normalise_group("Disease or Syndrome") == ("DISO", True)
    assert normalise_group("drug") == ("CHEM", True)
    assert normalise_group("spaceship") == (None, False)


def test_graph_post_processing_drops_invalid_elements_and_counts_them() -> None:
    graph = clean_graph(
        [
            EntityDraft(id="E1", name="beta", type="drug", evidence=["L1"]),
            EntityDraft(id="E2", name="X", type="DISO", evidence=["L2", "L9"]),
            EntityDraft(id="E3", name="thing", type="spaceship", evidence=["L1"]),
            EntityDraft(id="E4", name="memory", type="CONC", evidence=[]),
        ],
        [
            RelationDraft(id="R1", source="E1", relation="treats", target="E2", evidence=["L1"]),
            RelationDraft(id="R2", source="E1", relation="likes", target="E2", evidence=["L1"]),
            RelationDraft(id="R3", source="E1", relation="treats", target="E3", evidence=["L1"]),
            RelationDraft(id="R4", source="E1", relation="causes", target="E2", evidence=["W1"]),
        ],
        EVIDENCE,
    )
    assert [e.id for e in graph.entities] == ["E1", "E2"]
    assert graph.entities[1].evidence == ["L2"]
    assert [r.id for r in graph.relations] == ["R1"]
    c = graph.cleanup
    assert (c.types_normalised, c.entities_dropped_type, c.entities_dropped_ungrounded) == (1, 1, 1)
    assert (c.relations_dropped_type, c.relations_dropped_orphan, c.relations_dropped_ungrounded) == (1, 1, 1)
    assert c.citations_removed == 2


def test_empty_graph_is_allowed() -> None:
    graph = clean_graph([], [], EVIDENCE)
    assert graph.is_empty
    judgment = judge(Q, [v("A", "insufficient")], EVIDENCE, stated_decision="parametric", model_answer="D", graph=graph)
    assert judgment.mode == "explicit"
    assert judgment.decision == "parametric"
    assert judgment.answer == Answer.of_letters("D")


# ------------------------------------------------------------------------------------------- parser fallback


def test_verdicts_are_salvaged_from_lines() -> None:
    raw = (
        "[[ ## verdicts ## ]]\nA: contradicted [L1]\n- Option B - L2, L3 - SUPPORTED\nC) insufficient\n"
        "[[ ## decision ## ]]\ngrounded\n[[ ## answer ## ]]\nB"
    )
    sections = raw_sections(raw)
    assert sections["answer"] == "B"
    drafts = parse_verdict_lines(sections["verdicts"])
    assert [(d.option, d.verdict, d.evidence) for d in drafts] == [
        ("A", "contradicted", ["L1"]),
        ("B", "supported", ["L2", "L3"]),
        ("C", "insufficient", []),
    ]


def test_verdicts_are_salvaged_from_broken_json() -> None:
    text = '[{"option": "A", "evidence": ["L1"], "verdict": "supported"}, {"option": "B", "evidence": [], "verdict": "insuff'
    drafts = parse_verdict_lines(text)
    assert [(d.option, d.verdict, d.evidence) for d in drafts] == [("A", "supported", ["L1"])]


def test_nothing_to_salvage_gives_nothing() -> None:
    assert parse_verdict_lines("I cannot answer this.") == []
