"""What a CLEAR run's recorded pathways were worth, with zero LM calls.

For MCQ runs: each pathway's own accuracy, the deterministic verifier's accuracy over the same candidates
(the CLEAR code's fallback order: what `verifier_mode = "heuristic"` would route, before guard and audit),
and the oracle: some pathway was right. The gap between the program's accuracy and these numbers says
whether adjudication, not evidence, is the bottleneck.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from clearmed.metrics import score_mcq
from clearmed.programs.rules import answer_for_route, heuristic_verify
from clearmed.signatures.records import PATHWAYS, Decision


class PathwayWorth(BaseModel):
    model_config = ConfigDict(extra="forbid")

    questions: int
    pathway_accuracy: dict[str, float]
    deterministic_verifier_accuracy: float
    any_pathway_correct: float


def pathway_worth(decisions: Sequence[Decision]) -> PathwayWorth | None:
    """None unless every decision is a three-pathway decision on a scored MCQ question."""
    usable = [
        d for d in decisions if d.agreement is not None and d.bundle.question.is_mcq and d.bundle.question.gold_letters
    ]
    if not usable or len(usable) != len(decisions):
        return None
    hits = dict.fromkeys(PATHWAYS, 0)
    deterministic = oracle = 0
    for decision in usable:
        question, bundle = decision.bundle.question, decision.bundle
        right = {p: score_mcq(question, bundle.candidate(p).answer).correct for p in PATHWAYS}
        for pathway, ok in right.items():
            hits[pathway] += ok
        oracle += any(right.values())
        assert decision.agreement is not None
        output, _ = heuristic_verify(bundle, decision.agreement, bundle.dynamic_quality(), allow_more_search=False)
        deterministic += score_mcq(question, answer_for_route(output.route, bundle, decision.agreement)).correct
    n = len(usable)
    return PathwayWorth(
        questions=n,
        pathway_accuracy={p: round(hits[p] / n, 4) for p in PATHWAYS},
        deterministic_verifier_accuracy=round(deterministic / n, 4),
        any_pathway_correct=round(oracle / n, 4),
    )
