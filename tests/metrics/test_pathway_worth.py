"""What the recorded pathways were worth: per-pathway accuracy, the deterministic verifier, the oracle."""

from __future__ import annotations

from clearmed.evaluation.pathway_worth import pathway_worth
from clearmed.signatures.records import Decision
from clearmed.testing import QUESTION, ScriptValue, build_toy_program, label_all, pathway_replies, verifier_reply


def decided(parametric: str, local: str, dynamic: str, route: str) -> Decision:
    script: dict[str, ScriptValue] = {
        **pathway_replies(parametric, local, dynamic),
        "source_quality": label_all("low"),
        "verifier": verifier_reply(route, parametric),
        "followup_query": {"query": "q"},
        "audit": {"rationale": "no", "clearly_supports_challenger": False, "aligned_with_question": True},
    }
    program, _, _ = build_toy_program(script)
    return program(question=QUESTION).decision


def test_worth_counts_pathways_the_deterministic_verifier_and_the_oracle() -> None:
    decisions = [
        decided("B", "A", "A", "keep_parametric"),  # gold A: LM verifier wrong; local = dynamic -> consensus A
        decided("C", "D", "B", "keep_parametric"),  # nobody right
        decided("A", "A", "C", "consensus"),  # parametric = local -> A
    ]
    worth = pathway_worth(decisions)
    assert worth is not None
    assert worth.questions == 3
    assert worth.pathway_accuracy == {
        "parametric": round(1 / 3, 4),
        "local": round(2 / 3, 4),
        "dynamic": round(1 / 3, 4),
    }
    assert worth.deterministic_verifier_accuracy == round(2 / 3, 4)
    assert worth.any_pathway_correct == round(2 / 3, 4)


def test_no_worth_for_single_pathway_runs() -> None:
    decision = decided("A", "A", "A", "consensus").model_copy(update={"agreement": None})
    assert pathway_worth([decision]) is None
