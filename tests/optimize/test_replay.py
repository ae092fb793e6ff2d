"""Replaying stored decisions: same thresholds reproduce the decision with zero LM calls; new branches miss."""

from __future__ import annotations

import pytest

from clearmed.optimize.replay import ReplayMiss, replay_decision
from clearmed.programs.adjudication import Mechanisms
from clearmed.signatures.records import Answer, Decision, Thresholds
from clearmed.testing import (
    AUDIT_ALL_TRUE,
    GUARD_ALL_TRUE,
    QUESTION,
    build_toy_program,
    label_all,
    pathway_replies,
    verifier_reply,
)


def stored(script: dict, thresholds: Thresholds | None = None) -> Decision:
    program, _, _ = build_toy_program(script, thresholds=thresholds)
    decision = program(question=program_question()).decision
    return Decision.model_validate_json(decision.model_dump_json())  # as read back from a run folder


def program_question():

    return QUESTION


GUARD_RUN = {
    **pathway_replies("B", "B", "A"),
    "source_quality": label_all("high"),
    "verifier": verifier_reply("accept_dynamic"),
    "followup_query": {"query": "hypothyroidism TSH"},
    "guard": GUARD_ALL_TRUE,
}
AUDIT_RUN = {
    **pathway_replies("B", "B", "A"),
    "source_quality": label_all("high"),  # the follow-up finds one page: a high one opens the audit
    "verifier": verifier_reply("consensus", answer="B"),
    "followup_query": {"query": "hypothyroidism TSH"},
    "audit": AUDIT_ALL_TRUE,
}


@pytest.mark.parametrize(
    "script",
    [
        GUARD_RUN,
        AUDIT_RUN,
        {
            **pathway_replies("A", "B", "C"),
            "source_quality": label_all("low"),
            "verifier": verifier_reply("needs_more_search"),
            "followup_query": {"query": "hypothyroidism TSH"},
        },
    ],
)
def test_same_thresholds_reproduce_the_decision(script: dict) -> None:
    decision = stored(script)
    result, actions = replay_decision(decision, decision.thresholds)
    assert (result.answer, result.route, result.rule) == (decision.answer, decision.route, decision.deciding_rule)
    assert actions.misses == []


def test_a_guard_follow_up_that_found_nothing_new_is_rejected_again_in_replay() -> None:
    decision = stored({**GUARD_RUN, "followup_query": {"query": "weight gain cold intolerance"}})
    assert decision.deciding_rule == "guard_rejected_no_followup_evidence"
    result, actions = replay_decision(decision, decision.thresholds)
    assert (result.answer, result.route, result.rule) == (decision.answer, decision.route, decision.deciding_rule)
    assert actions.misses == []
    assert actions.served["follow_up"] == 1
    assert actions.served["guard"] == 0  # no assessment was made, and replay asks for none


def test_a_recorded_grant_on_an_empty_follow_up_is_rejected_in_replay() -> None:
    # A run stored before the rule: the guard granted although its follow-up round found nothing.
    decision = stored(GUARD_RUN)
    assert decision.deciding_rule == "guard_granted"
    empty = decision.bundle.followups[0].model_copy(update={"passages": []})
    old = decision.model_copy(update={"bundle": decision.bundle.model_copy(update={"followups": [empty]})})
    result, actions = replay_decision(old, old.thresholds)
    assert result.rule == "guard_rejected_no_followup_evidence"
    assert result.answer is not None
    assert result.answer.letters == ("B",)
    assert actions.misses == []


def test_a_stricter_guard_rejects_from_the_record_alone() -> None:
    decision = stored(GUARD_RUN)
    assert decision.deciding_rule == "guard_granted"
    result, actions = replay_decision(decision, Thresholds(guard_min_high=3))
    assert result.rule == "guard_rejected_few_high_quality"
    assert result.answer is not None
    assert result.answer.letters == ("B",)
    assert actions.misses == []


def test_a_stricter_audit_rejects_from_the_record_alone() -> None:
    decision = stored(AUDIT_RUN)
    assert decision.deciding_rule == "audit_accepted"
    result, _ = replay_decision(decision, Thresholds(audit_min_high=2, audit_min_medium=5))
    assert result.rule == "audit_rejected_evidence_counts"


def test_ablating_the_guard_is_replayed_without_calls() -> None:
    decision = stored(GUARD_RUN)
    result, actions = replay_decision(decision, decision.thresholds, Mechanisms(guard=False))
    assert (result.rule, result.route) == ("verifier", "accept_dynamic")
    assert actions.misses == []


def test_a_branch_never_taken_is_a_miss() -> None:
    decision = stored(GUARD_RUN, thresholds=Thresholds(guard_min_high=5))  # original: rejected, no follow-up
    with pytest.raises(ReplayMiss, match="guard follow-up search"):
        replay_decision(decision, Thresholds(guard_min_high=1))


def test_a_record_without_what_its_steps_judged_is_derived_from_its_trail_and_replays_exactly() -> None:
    for script in (GUARD_RUN, AUDIT_RUN):
        decision = stored(script)
        raw = decision.model_dump(mode="json")
        for step in raw["steps"]:
            step.pop("inputs"), step.pop("contest")  # as written before issue 26
        old = Decision.model_validate(raw)
        result, actions = replay_decision(old, Thresholds())
        assert (result.answer, result.rule, actions.misses) == (decision.answer, decision.deciding_rule, [])
        assert actions.served["guard"] + actions.served["audit"] == 1


def test_a_verifier_output_is_reused_only_for_what_it_verified() -> None:
    decision = stored(AUDIT_RUN)
    step = next(s for s in decision.steps if s.mechanism == "verifier")
    assert step.inputs is not None
    other = step.inputs.model_copy(update={"answers": {**step.inputs.answers, "dynamic": Answer.of_letters("C")}})
    steps = [s.model_copy(update={"inputs": other}) if s is step else s for s in decision.steps]
    with pytest.raises(ReplayMiss, match="a verification of these answers"):
        replay_decision(decision.model_copy(update={"steps": steps}), Thresholds())
