"""Replay serves a follow-up round only beside rounds that leave it the same pages (issue 31, item 7): a round
records what it left out as already in the bundle, and replay misses when the replayed bundle would not."""

from __future__ import annotations

import pytest

from clearmed.optimize.replay import ReplayMiss, replay_decision
from clearmed.signatures.records import Decision, Thresholds
from clearmed.testing import AUDIT_ALL_TRUE, QUESTION, build_toy_program, label_all, pathway_replies, verifier_reply


def script() -> dict:
    replies = iter([verifier_reply("needs_more_search"), verifier_reply("consensus", answer="A")])
    return {
        **pathway_replies("A", "A", "B"),
        "source_quality": label_all("high"),
        "verifier": lambda call: next(replies),
        "followup_query": {"query": "hypothyroidism TSH"},  # finds the one page only a follow-up finds
        "audit": AUDIT_ALL_TRUE,
    }


def decide(thresholds: Thresholds) -> Decision:
    program, _, _ = build_toy_program(script(), thresholds=thresholds)
    decision = program(question=QUESTION).decision
    return Decision.model_validate_json(decision.model_dump_json())


def test_a_round_recorded_beside_another_is_not_served_without_it() -> None:
    recorded = decide(Thresholds(max_followup_rounds=1))
    # The needs_more_search round found the follow-up page; the audit's round found it again and left it out.
    needs_more, audit = recorded.bundle.followups
    assert [p.provenance.url for p in needs_more.passages] == ["https://medlineplus.gov/hypothyroidism.html"]
    assert audit.passages == []
    assert "https://medlineplus.gov/hypothyroidism.html" in (audit.excluded or [])
    assert recorded.deciding_rule == "audit_rejected_evidence_counts"
    same, actions = replay_decision(recorded, recorded.thresholds)
    assert (same.rule, actions.misses) == (recorded.deciding_rule, [])
    # Without the first round, a live audit's follow-up finds the page new, and the challenge is accepted ...
    live = decide(Thresholds(max_followup_rounds=0))
    assert (live.deciding_rule, live.letters) == ("audit_accepted", ("B",))
    # ... so replay must not serve the empty round (before: replayed audit_rejected A, without a miss).
    with pytest.raises(ReplayMiss, match="audit follow-up search beside these rounds"):
        replay_decision(recorded, Thresholds(max_followup_rounds=0))


def test_an_older_round_is_served_only_beside_the_rounds_it_had() -> None:
    recorded = decide(Thresholds(max_followup_rounds=1))
    raw = recorded.model_dump(mode="json")
    for round_ in raw["bundle"]["followups"]:
        round_.pop("excluded")  # as written before rounds said what they left out
    older = Decision.model_validate(raw)
    same, actions = replay_decision(older, older.thresholds)
    assert (same.rule, actions.misses) == (recorded.deciding_rule, [])
    with pytest.raises(ReplayMiss, match="beside these rounds"):
        replay_decision(older, Thresholds(max_followup_rounds=0))


def test_rendering_a_round_for_the_verifier_leaves_the_first_search_as_it_was() -> None:
    recorded = decide(Thresholds(max_followup_rounds=1))
    # Before: the verifier's evidence view extended the bundle's own list, so the stored first search held the
    # follow-up page too (and replay, starting from it, saw that page as already found).
    urls = [p.provenance.url for p in recorded.bundle.dynamic_passages]
    assert "https://medlineplus.gov/hypothyroidism.html" not in urls
