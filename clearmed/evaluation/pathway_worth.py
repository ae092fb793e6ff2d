"""What a CLEAR run's recorded pathways were worth, with zero LM calls.

For MCQ runs: each pathway's own accuracy (as it first answered: a dynamic answer re-scored on follow-up
evidence, or any answer the letter-prior correction changed, counts for the program, not for the pathway), the deterministic verifier's accuracy over the same candidates
(the CLEAR code's fallback order: what `verifier_mode = "heuristic"` would route, before guard and audit),
and the oracle: some pathway was right. The gap between the program's accuracy and these numbers says
whether adjudication, not evidence, is the bottleneck.

The oracle is read against `chance_oracle`, what it would be if the pathways erred independently at their
accuracies (1 - prod(1 - acc)): three near-chance pathways are "some pathway right" about 58% of the time by
luck alone. Pathways that scored their options (`Candidate.option_scores`) also get a calibration row (ECE,
reliability bins) and the backbone's letter prior.

Per route (`by_route`): how often the program was right on the questions it routed that way, how often each
pathway was, and what the route gained and lost against the parametric pathway, which is the Direct baseline's
answer (the same module and prompt). That is where adjudication wins or loses against answering directly.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from clearmed.metrics import Calibration, calibration, letter_prior, score_mcq
from clearmed.programs.adjudication.rules import answer_for_route, heuristic_verify, left_out
from clearmed.signatures.records import PATHWAYS, Decision


class RouteWorth(BaseModel):
    """The questions one route decided: the program's and each pathway's correct answers, and the program's
    gains and losses against the parametric pathway on them."""

    model_config = ConfigDict(extra="forbid")

    route: str
    questions: int
    program_correct: int
    pathway_correct: dict[str, int]
    gained_vs_parametric: int
    lost_vs_parametric: int


class PathwayWorth(BaseModel):
    model_config = ConfigDict(extra="forbid")

    questions: int
    pathway_accuracy: dict[str, float]
    deterministic_verifier_accuracy: float
    any_pathway_correct: float
    chance_oracle: float = 0.0
    calibration: dict[str, Calibration] = {}
    letter_prior: dict[str, dict[str, dict[str, float]]] = {}
    by_route: list[RouteWorth] = []


def pathway_worth(decisions: Sequence[Decision]) -> PathwayWorth | None:
    """None unless every decision is a three-pathway decision on a scored MCQ question."""
    usable = [
        d for d in decisions if d.agreement is not None and d.bundle.question.is_mcq and d.bundle.question.gold_letters
    ]
    if not usable or len(usable) != len(decisions):
        return None
    # A pathway left out by choice on every question (`--pathway dynamic=absent`) has no accuracy to show: a 0%
    # would read as a pathway that ran and always failed, and would make the chance oracle its own.
    never_run = set.intersection(*(set(left_out(d.bundle)) for d in usable))
    ran = [p for p in PATHWAYS if p not in never_run]
    hits: dict[str, int] = dict.fromkeys(ran, 0)
    deterministic = oracle = 0
    confidences: dict[str, list[float]] = {p: [] for p in ran}
    corrects: dict[str, list[bool]] = {p: [] for p in ran}
    distributions: dict[str, list[dict[str, float]]] = {p: [] for p in ran}
    routes: dict[str, list[tuple[bool, dict[str, bool]]]] = {}
    for decision in usable:
        assert decision.agreement is not None
        # The pathways as they answered, before a follow-up round re-scored the dynamic one.
        bundle, agreement = decision.bundle.initial(), decision.agreement
        question = bundle.question
        right: dict[str, bool] = {p: score_mcq(question, bundle.candidate(p).answer).correct for p in PATHWAYS}
        for pathway in ran:
            scores = bundle.candidate(pathway).option_scores
            if scores is not None and not scores.per_option:
                confidences[pathway].append(max(scores.probs.values()))
                corrects[pathway].append(right[pathway])
                distributions[pathway].append(scores.probs)
        for name in ran:
            hits[name] += right[name]
        oracle += any(right.values())
        route = decision.route or decision.deciding_rule or "none"
        routes.setdefault(route, []).append((score_mcq(question, decision.answer).correct, right))
        output, _ = heuristic_verify(bundle, agreement, bundle.dynamic_quality(), allow_more_search=False)
        deterministic += score_mcq(question, answer_for_route(output.route, bundle, agreement)).correct
    n = len(usable)
    chance_miss = 1.0
    for pathway in ran:
        chance_miss *= 1 - hits[pathway] / n
    calibrated: dict[str, Calibration] = {
        p: c for p in ran if (c := calibration(confidences[p], corrects[p])) is not None
    }
    return PathwayWorth(
        questions=n,
        pathway_accuracy={p: round(hits[p] / n, 4) for p in ran},
        deterministic_verifier_accuracy=round(deterministic / n, 4),
        any_pathway_correct=round(oracle / n, 4),
        chance_oracle=round(1 - chance_miss, 4),
        calibration=calibrated,
        letter_prior={p: letter_prior(distributions[p]) for p in calibrated},
        by_route=[_route_worth(route, rows, ran) for route, rows in sorted(routes.items())],
    )


def _route_worth(route: str, rows: Sequence[tuple[bool, dict[str, bool]]], ran: Sequence[str]) -> RouteWorth:
    return RouteWorth(
        route=route,
        questions=len(rows),
        program_correct=sum(ok for ok, _ in rows),
        pathway_correct={p: sum(right[p] for _, right in rows) for p in ran},
        gained_vs_parametric=sum(ok and not right["parametric"] for ok, right in rows),
        lost_vs_parametric=sum(right["parametric"] and not ok for ok, right in rows),
    )
