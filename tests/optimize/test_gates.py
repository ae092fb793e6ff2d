"""The tuning gates in Thresholds: off by default, pure rules, and the same outcome live and in replay."""

from __future__ import annotations

from datetime import date
from typing import get_args

import pytest

from clearmed.optimize.replay import replay_decision
from clearmed.programs import rules
from clearmed.programs._quality_gate import effective_quality, prior_scores
from clearmed.retrieval.quality import QualityPriors, prior_score
from clearmed.signatures.records import (
    Decision,
    EvidenceBundle,
    QualityAssessment,
    SourceQuality,
    Thresholds,
)
from clearmed.signatures.records import DomainTier as Tier
from clearmed.testing import (
    AUDIT_ALL_TRUE,
    GUARD_ALL_TRUE,
    QUESTION,
    WEB,
    build_toy_program,
    label_all,
    pathway_replies,
    verifier_reply,
)

TODAY = date(2026, 6, 1)


def test_default_thresholds_switch_every_gate_off() -> None:
    default = Thresholds()
    assert not default.quality_gate_on
    assert default.accept_dynamic_min_confidence == "low"
    assert default.audit_skip_confidence is None
    assert default.prior_tier_weights == {}
    # Records written before the gates existed still load, with the gates off.
    old = Thresholds.model_validate({"guard_min_high": 1, "audit_min_high": 1, "audit_min_medium": 2})
    assert old == default


def test_tier_names_match_the_retrieval_tiers() -> None:
    annotation = Thresholds.model_fields["prior_tier_weights"].annotation
    key_type = get_args(annotation)[0]
    assert set(get_args(key_type)) == set(get_args(Tier))


@pytest.mark.parametrize(
    ("confidence", "gate", "passes"),
    [("low", "low", True), ("low", "medium", False), ("medium", "medium", True), ("high", "medium", True)],
)
def test_guard_confidence_gate(confidence: str, gate: str, passes: bool) -> None:
    thresholds = Thresholds(accept_dynamic_min_confidence=gate)  # type: ignore[arg-type]
    assert rules.guard_confident_enough(confidence, thresholds) is passes  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("confidence", "gate", "skipped"),
    [("high", None, False), ("high", "high", True), ("medium", "high", False), ("medium", "medium", True)],
)
def test_audit_skip_gate(confidence: str, gate: str | None, skipped: bool) -> None:
    thresholds = Thresholds(audit_skip_confidence=gate)  # type: ignore[arg-type]
    assert rules.audit_skippable(confidence, thresholds) is skipped  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("label", "prior", "high_at", "medium_at", "counted"),
    [
        ("high", 0.9, 0.8, None, "high"),
        ("high", 0.5, 0.8, None, "medium"),
        ("high", 0.2, 0.8, 0.4, "low"),
        ("medium", 0.2, 0.8, 0.4, "low"),
        ("medium", 0.2, 0.8, None, "medium"),
        ("low", 0.99, 0.8, 0.4, "low"),  # the gate only ever lowers a label
    ],
)
def test_quality_gate_caps_llm_labels_by_prior(
    label: str, prior: float, high_at: float, medium_at: float | None, counted: str
) -> None:
    quality = SourceQuality(assessments=[QualityAssessment(passage_id="W1", label=label)])  # type: ignore[arg-type]
    thresholds = Thresholds(high_requires_prior=high_at, medium_requires_prior=medium_at)
    gated = rules.gate_quality(quality, {"W1": prior}, thresholds)
    assert gated.assessments[0].label == counted


def test_gate_off_returns_the_labels_unchanged() -> None:
    quality = SourceQuality(assessments=[QualityAssessment(passage_id="W1", label="high")])
    assert rules.gate_quality(quality, {"W1": 0.0}, Thresholds()) is quality


def _bundle() -> EvidenceBundle:
    labelled = SourceQuality(assessments=[QualityAssessment(passage_id=p.id, label="high") for p in WEB])
    return EvidenceBundle(question=QUESTION, candidates=[], dynamic_passages=list(WEB), source_quality=labelled)


def test_prior_scores_match_retrieval_priors_and_take_tier_weights() -> None:
    priors = QualityPriors()
    scores = prior_scores(list(WEB), Thresholds(), priors, TODAY)
    for page in WEB:
        assert scores[page.id] == pytest.approx(prior_score(page, priors, TODAY), abs=2e-4)
    boosted = prior_scores(list(WEB), Thresholds(prior_tier_weights={"unknown": 1.0}), priors, TODAY)
    assert boosted["p2"] > scores["p2"]  # the blog is an unknown-tier site
    assert boosted["p1"] == scores["p1"]  # nih.gov is government


def test_effective_quality_demotes_the_blog_only() -> None:
    bundle = _bundle()
    assert effective_quality(bundle, Thresholds(), today=TODAY).n_high == 2
    gated = effective_quality(bundle, Thresholds(high_requires_prior=0.8), today=TODAY)
    assert (gated.n_high, gated.n_medium) == (1, 1)  # nih.gov keeps high; the blog (~0.35) counts as medium
    both = effective_quality(bundle, Thresholds(high_requires_prior=0.8, medium_requires_prior=0.5), today=TODAY)
    assert (both.n_high, both.n_medium, both.n_low) == (1, 0, 1)


GUARD_RUN = {
    **pathway_replies("B", "B", "A"),
    "source_quality": label_all("high"),
    "verifier": verifier_reply("accept_dynamic", confidence="medium"),
    "followup_query": {"query": "hypothyroidism TSH"},
    "guard": GUARD_ALL_TRUE,
}
AUDIT_RUN = {
    **pathway_replies("B", "B", "A"),
    "source_quality": label_all("medium"),
    "verifier": verifier_reply("consensus", answer="B", confidence="high"),
    "followup_query": {"query": "hypothyroidism TSH"},
    "audit": AUDIT_ALL_TRUE,
}


def _decide(script: dict, thresholds: Thresholds) -> tuple[Decision, list[str]]:
    program, engine, _ = build_toy_program(script, thresholds=thresholds)
    decision = program(question=QUESTION).decision
    return Decision.model_validate_json(decision.model_dump_json()), engine.stages()


@pytest.mark.parametrize(
    ("script", "gated", "rule", "skipped_stage"),
    [
        (GUARD_RUN, Thresholds(accept_dynamic_min_confidence="high"), "guard_rejected_low_confidence", "guard"),
        (GUARD_RUN, Thresholds(high_requires_prior=0.95), "guard_rejected_few_high_quality", "guard"),
        (AUDIT_RUN, Thresholds(audit_skip_confidence="high"), "audit_skipped_confident_consensus", "audit"),
    ],
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
