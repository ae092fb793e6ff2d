"""A threshold gate decides the same live and in replay, with no new LM call."""

from __future__ import annotations

import pytest

from clearmed.optimize.replay import replay_decision
from clearmed.signatures.records import Decision, Thresholds
from clearmed.testing import (
    GUARD_ALL_TRUE,
    QUESTION,
    build_toy_program,
    label_all,
    pathway_replies,
    verifier_reply,
)

GUARD_RUN = {
    **pathway_replies("B", "B", "A"),
    "source_quality": label_all("high"),
    "verifier": verifier_reply("accept_dynamic", confidence="medium"),
    "followup_query": {"query": "hypothyroidism TSH"},
    "guard": GUARD_ALL_TRUE,
}


def _decide(script: dict, thresholds: Thresholds) -> tuple[Decision, list[str]]:
    program, engine, _ = build_toy_program(script, thresholds=thresholds)
    decision = program(question=QUESTION).decision
    return Decision.model_validate_json(decision.model_dump_json()), engine.stages()


@pytest.mark.parametrize(
    ("script", "gated", "rule", "skipped_stage"),
    [(GUARD_RUN, Thresholds(guard_min_high=3), "guard_rejected_few_high_quality", "guard")],
)
def test_gates_decide_live_and_replay_the_same(script: dict, gated: Thresholds, rule: str, skipped_stage: str) -> None:
    recorded, stages = _decide(script, Thresholds())
    assert skipped_stage in stages
    assert recorded.deciding_rule != rule
    live, live_stages = _decide(script, gated)
    assert live.deciding_rule == rule
    assert skipped_stage not in live_stages
    assert "followup_query" not in live_stages
    assert live.letters == ("B",)
    replayed, actions = replay_decision(recorded, gated)
    assert (replayed.rule, replayed.answer, replayed.route) == (rule, live.answer, live.route)
    assert actions.misses == []
