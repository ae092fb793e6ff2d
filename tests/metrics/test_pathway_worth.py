"""What the recorded pathways were worth: per-pathway accuracy, the deterministic verifier, the oracle."""

from __future__ import annotations

from clearmed.evaluation.pathway_worth import pathway_worth
from clearmed.programs.pathways.recorded import AbsentPathway
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


def test_worth_by_route_counts_the_program_and_each_pathway_and_the_net_against_direct() -> None:
    decisions = [
        decided("B", "A", "A", "keep_parametric"),  # gold A: kept the wrong parametric answer
        decided("C", "D", "B", "keep_parametric"),  # nobody right
        decided("A", "A", "C", "consensus"),  # right, as Direct was
        decided("B", "A", "C", "keep_local"),  # right where Direct was wrong: a gain
    ]
    worth = pathway_worth(decisions)
    assert worth is not None
    routes = {r.route: r for r in worth.by_route}
    assert sorted(routes) == ["consensus", "keep_local", "keep_parametric"]
    kept = routes["keep_parametric"]
    assert (kept.questions, kept.program_correct, kept.gained_vs_parametric, kept.lost_vs_parametric) == (2, 0, 0, 0)
    assert kept.pathway_correct == {"parametric": 0, "local": 1, "dynamic": 1}
    local = routes["keep_local"]
    assert (local.questions, local.program_correct, local.gained_vs_parametric, local.lost_vs_parametric) == (
        1,
        1,
        1,
        0,
    )
    assert routes["consensus"].program_correct == 1


def test_the_route_table_in_the_report_nets_gains_against_direct() -> None:
    from clearmed.report.markdown import _routes_markdown

    worth = pathway_worth([decided("B", "A", "C", "keep_local"), decided("A", "A", "C", "consensus")])
    assert worth is not None
    text = _routes_markdown(worth)
    assert "| keep_local | 1 | 1 | 0 | 1 | 0 | 1 / 0 |" in text
    assert "1 gained, 0 lost" in text


def _dynamic_left_out(decision: Decision) -> Decision:
    """The decision as `--pathway dynamic=absent` leaves it: no dynamic candidate, so no agreement with it."""
    bundle = decision.bundle
    absent = AbsentPathway("dynamic").forward(bundle.question).candidate
    candidates = [absent if c.pathway == "dynamic" else c for c in bundle.candidates]
    assert decision.agreement is not None
    agreement = decision.agreement.model_copy(update={"parametric_dynamic": None, "local_dynamic": None})
    return decision.model_copy(
        update={"bundle": bundle.model_copy(update={"candidates": candidates}), "agreement": agreement}
    )


def test_a_pathway_left_out_on_every_question_has_no_accuracy_column_or_share_of_the_chance_oracle() -> None:
    from clearmed.report.markdown import _routes_markdown

    # gold A: parametric right on 1 of 2, local on 2 of 2; the dynamic pathway never ran
    decisions = [
        _dynamic_left_out(decided("B", "A", "A", "keep_local")),
        _dynamic_left_out(decided("A", "A", "C", "consensus")),
    ]
    worth = pathway_worth(decisions)
    assert worth is not None
    assert worth.pathway_accuracy == {"parametric": 0.5, "local": 1.0}
    assert worth.chance_oracle == 1.0  # 1 - (1 - 0.5) * (1 - 1.0), with no 0% dynamic factor
    assert all("dynamic" not in r.pathway_correct for r in worth.by_route)
    assert "dynamic correct" not in _routes_markdown(worth)
    # a pathway that ran on some question keeps its column
    mixed = pathway_worth([decisions[0], decided("A", "A", "C", "consensus")])
    assert mixed is not None
    assert "dynamic" in mixed.pathway_accuracy
