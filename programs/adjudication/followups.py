"""Follow-up bookkeeping (CLEAR 2.3.3): a round is added beside the bundle, never merged into its candidates."""

from __future__ import annotations

from clearmed.signatures.records import AdjudicationStep, EvidenceBundle, FollowUpRound


def with_round(bundle: EvidenceBundle, round_: FollowUpRound) -> EvidenceBundle:
    """B' = Merge(B, E_follow, P_follow, S_follow): the bundle's records and this round beside them."""
    return bundle.model_copy(update={"followups": [*bundle.followups, round_]})


def followup_step(round_: FollowUpRound, trigger: str) -> AdjudicationStep:
    """The trail's line for a round."""
    found = len(round_.passages)
    quality = round_.source_quality
    outcome = f"query {round_.query!r}: {found} results (high={quality.n_high}, medium={quality.n_medium})"
    if round_.query_cut_chars is not None:
        outcome += f"; the written query was cut from {round_.query_cut_chars} characters to the search's limit"
    return AdjudicationStep(mechanism="followup", trigger=trigger, outcome=outcome, error=round_.error)
