"""The routes of the aggregation verifier and the ids of the rules that decide: each defined here, once.

`ROUTE_TABLE` is the one definition of a route: what it means (the verifier prompt lists these meanings), which
pathway its answer comes from (`answer_for_route`), how the terminal shows it, and whether the override guard or
the challenge audit may follow it. The prompt's route list, the rules, the renderer and replay all read it, so a
route added here is a route everywhere.

`Route` names the routes as a `Literal`, so type checkers refuse any other string where a route is meant; the
table has one entry per name (tests/signatures/test_route_table.py checks both ways). `RuleId` is the complete
registry of the rules that can decide a step or a Decision, and `Mechanism` of what can take a step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from clearmed.signatures.records.base import PathwayName

Route = Literal["consensus", "keep_parametric", "keep_local", "accept_dynamic", "needs_more_search"]

# Where a route's answer comes from: one pathway's candidate, the answer two pathways share, or none yet.
AnswerSource = PathwayName | Literal["agreement", "none"]


@dataclass(frozen=True)
class RouteSpec:
    meaning: str  # what the verifier is told the route means
    answer_from: AnswerSource
    style: str  # Rich style of the route in the terminal view
    guard: bool  # the override guard may follow (when the dynamic answer stands against the others)
    audit: bool  # the challenge audit may follow (when the dynamic answer challenges a consensus)


ROUTE_TABLE: dict[Route, RouteSpec] = {
    "consensus": RouteSpec(
        "at least two pathways agree and the evidence shows no material contradiction",
        answer_from="agreement",
        style="green",
        guard=False,
        audit=True,
    ),
    "keep_parametric": RouteSpec(
        "the parametric answer is better supported and the evidence does not justify revising it",
        answer_from="parametric",
        style="cyan",
        guard=False,
        audit=True,
    ),
    "keep_local": RouteSpec(
        "the locally grounded answer is best supported by the curated evidence",
        answer_from="local",
        style="cyan",
        guard=False,
        audit=True,
    ),
    "accept_dynamic": RouteSpec(
        "the dynamic answer is backed by relevant, reliable external evidence that justifies revising",
        answer_from="dynamic",
        style="magenta",
        guard=True,
        audit=False,
    ),
    "needs_more_search": RouteSpec(
        "the evidence is insufficient or inconsistent and cannot separate the answers",
        answer_from="none",
        style="yellow",
        guard=False,
        audit=True,
    ),
}

# The route that asks for a follow-up search before deciding: the adjudication loop keys on it.
NEEDS_MORE_SEARCH: Final[Route] = "needs_more_search"


def route_spec(route: Route) -> RouteSpec:
    return ROUTE_TABLE[route]


def route_for(source: AnswerSource) -> Route:
    """The route whose answer comes from `source`: a pathway's route (keep or accept it), or the consensus."""
    return next(name for name, spec in ROUTE_TABLE.items() if spec.answer_from == source)


def route_meanings() -> str:
    """The routes as the verifier prompt lists them: 'name = meaning; ...'."""
    return "; ".join(f"{name} = {spec.meaning}" for name, spec in ROUTE_TABLE.items())


RuleId = Literal[
    # the verifier and its deterministic stand-in
    "unanimity_fast_path",
    "run_pathways_agree",
    "verifier",
    "calibrated",
    "learned",
    "heuristic_parametric_local",
    "heuristic_local_dynamic",
    "heuristic_parametric_dynamic_high_quality",
    "heuristic_keep_local",
    "heuristic_keep_parametric",
    "heuristic_accept_dynamic",
    "heuristic_nothing_answered",
    "followup_bound_reached",
    "route_not_backed",
    "single_usable_answer",
    "verifier_letter_kept",
    # the override guard
    "guard_rejected_few_high_quality",
    "guard_rejected_conditions",
    "guard_rejected_no_followup_evidence",
    "guard_rejected_followup_few_high_quality",
    "guard_assessment_failed",
    "guard_rejected_option_not_supported",
    "guard_granted",
    # the challenge audit
    "audit_rejected_evidence_counts",
    "audit_rejected_not_clearly_supported",
    "audit_assessment_failed",
    "audit_rejected_option_not_supported",
    "audit_accepted",
    # outside adjudication
    "no_pathway_answered",
    "format_gate",
    "input_over_budget",
    "single_pathway",
    "crashed",
]

# What takes a step of a Decision's trail.
Mechanism = Literal[
    "pathways",
    "agreement",
    "verifier",
    "guard",
    "audit",
    "followup",
    "format_gate",
    "response",
    "fallback",
]
