"""The override guard and the challenge audit (CLEAR 2.3.2, A.2): one contest, two policies.

In both, a default answer stands and the dynamic pathway's answer challenges it; the challenger wins only when
it clears a bar. The guard follows a verifier that proposed accept_dynamic against the other pathways: the default
is the parametric-local consensus (or the parametric answer), the bar is five conditions judged on new follow-up
evidence. The audit follows a verifier that kept the parametric-local consensus while the dynamic answer
differs: the bar is follow-up evidence that clearly supports the challenger. `run_contest` is the one sequence
(stop early, follow up, count the evidence, assess, rule); each policy says what stops it and how it rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, NamedTuple

from clearmed.programs.adjudication.actions import Adjudicated, AdjudicationActions, Proceedings
from clearmed.programs.adjudication.rules import (
    audit_accepts,
    audit_evidence_quality,
    audit_has_evidence,
    followup_found_evidence,
    guard_default,
    guard_followup_has_evidence,
    guard_grants,
    guard_may_search,
    judge_backs_challenger,
)
from clearmed.signatures.records import (
    AdjudicationStep,
    Answer,
    AuditAssessment,
    Confidence,
    Contest,
    FollowUpRound,
    GuardAssessment,
    Route,
    RuleId,
    StepError,
    VerifierOutput,
    route_for,
    route_spec,
)

Assessment = GuardAssessment | AuditAssessment


class Ruling(NamedTuple):
    """How a contest ends: the rule, the trail's outcome, whether the challenger won, what the step records."""

    rule: RuleId
    outcome: str
    revised: bool = False
    recorded: Mapping[str, object] = MappingProxyType({})


@dataclass(frozen=True)
class Contested:
    """A default answer contested by the dynamic challenger, and the verifier output that led here."""

    trigger: str
    default: Answer
    default_route: Route
    challenger: Answer
    verifier: VerifierOutput
    # What stands when the challenger loses, if not the default: the verifier's own letter (`answer_source =
    # "verifier"`), as the CLEAR code's audit leaves a verdict whose letter is not the challenger's as it was.
    kept: Answer | None = None


@dataclass(frozen=True)
class ContestPolicy:
    """What makes the guard the guard and the audit the audit."""

    mechanism: Literal["guard", "audit"]
    label: str  # how the Decision's rationale names it
    followup_trigger: str  # the trail's trigger of its follow-up round
    # Before any follow-up: a ruling that ends the contest, or None to go on.
    before_followup: Callable[[Proceedings, Contested], Ruling | None]
    # After the follow-up (or in its place, with follow-up switched off): the same.
    after_followup: Callable[[Proceedings, Contested, FollowUpRound | None], Ruling | None]
    assess: Callable[[AdjudicationActions], Callable[..., Assessment | StepError]]
    rule_on: Callable[[Assessment], Ruling]
    assessment_failed: Ruling
    # The confidence of the Decision, given the verifier's and whether the challenger won.
    confidence: Callable[[Confidence, bool], Confidence]


def _settle(policy: ContestPolicy, p: Proceedings, contest: Contested, ruling: Ruling) -> Adjudicated:
    answer, route = contest.kept or contest.default, contest.default_route
    if ruling.revised:
        answer, route = contest.challenger, route_for("dynamic")
    judged = Contest(default=contest.default, challenger=contest.challenger, followup_rounds=len(p.bundle.followups))
    step = AdjudicationStep(
        mechanism=policy.mechanism,
        trigger=contest.trigger,
        rule=ruling.rule,
        outcome=ruling.outcome,
        answer=answer,
        route=route,
        contest=judged,
        **ruling.recorded,  # type: ignore[arg-type]
    )
    p.steps.append(step)
    rationale = f"{policy.label}: {ruling.outcome}. {contest.verifier.rationale}".strip()
    confidence = policy.confidence(contest.verifier.confidence, ruling.revised)
    return p.conclude(answer, route, rationale, confidence, ruling.rule)


def run_contest(policy: ContestPolicy, p: Proceedings, contest: Contested) -> Adjudicated:
    """Stop early, or follow up, count the evidence and assess; every way out is one recorded step."""
    ruling = policy.before_followup(p, contest)
    if ruling is None:
        round_ = p.follow_up(policy.mechanism, policy.followup_trigger) if p.mechanisms.followup else None
        ruling = policy.after_followup(p, contest, round_)
    if ruling is None:
        assessment = policy.assess(p.actions)(p.bundle, contest.default, contest.challenger)
        if isinstance(assessment, StepError):
            ruling = policy.assessment_failed._replace(recorded={"error": assessment})
        else:
            ruling = policy.rule_on(assessment)
    return _settle(policy, p, contest, ruling)


# ------------------------------------------------------------------------------------------- the override guard


def guard_contest(p: Proceedings, verifier: VerifierOutput) -> Contested:
    default, default_route = guard_default(p.bundle, p.agreement)
    challenger = p.bundle.candidate("dynamic").answer
    assert challenger is not None  # guard_applies requires a dynamic answer
    against = "the parametric-local consensus" if p.agreement.parametric_local else "the other pathways"
    return Contested(
        "verifier proposed accept_dynamic against " + against, default, default_route, challenger, verifier
    )


def _guard_before(p: Proceedings, contest: Contested) -> Ruling | None:
    if judge_backs_challenger(p.bundle, contest.challenger) is False:
        return Ruling(
            "guard_rejected_option_not_supported",
            "override rejected without follow-up: the option-wise judge did not find the dynamic evidence "
            f"supporting option {contest.challenger.display()}",
        )
    quality, thresholds = p.bundle.dynamic_quality(), p.thresholds
    if not guard_may_search(quality, thresholds):
        return Ruling(
            "guard_rejected_few_high_quality",
            f"override rejected without follow-up: {quality.n_high} high-quality sources "
            f"(needs {thresholds.guard_min_high})",
        )
    return None


def _guard_after(p: Proceedings, contest: Contested, round_: FollowUpRound | None) -> Ruling | None:
    if round_ is None or guard_followup_has_evidence(round_, p.thresholds):
        return None
    if followup_found_evidence(round_):
        return Ruling(
            "guard_rejected_followup_few_high_quality",
            f"override rejected: the follow-up found {round_.source_quality.n_high} high-quality new sources "
            f"(needs {p.thresholds.guard_min_high})",
        )
    failed = round_.error is not None and round_.error.stage == "followup_search"
    return Ruling(
        "guard_rejected_no_followup_evidence",
        f"override rejected: the follow-up search {'failed' if failed else 'found nothing new'}, so there is no "
        "new evidence to grant it on",
    )


def _guard_rule(assessment: Assessment) -> Ruling:
    assert isinstance(assessment, GuardAssessment)
    if guard_grants(assessment):
        return Ruling(
            "guard_granted", "all six override conditions hold; override granted", True, {"guard": assessment}
        )
    failed = [name for name, held in assessment.model_dump(exclude={"rationale"}).items() if not held]
    return Ruling(
        "guard_rejected_conditions", f"override rejected: not {', not '.join(failed)}", False, {"guard": assessment}
    )


GUARD = ContestPolicy(
    mechanism="guard",
    label="Override guard",
    followup_trigger="override guard",
    before_followup=_guard_before,
    after_followup=_guard_after,
    assess=lambda actions: actions.assess_guard,
    rule_on=_guard_rule,
    assessment_failed=Ruling("guard_assessment_failed", "guard assessment failed; default kept"),
    # A granted override keeps the verifier's confidence; a rejected one is a medium-confidence default.
    confidence=lambda verifier, granted: verifier if granted else "medium",
)


# ------------------------------------------------------------------------------------------- the challenge audit


def audit_contest(p: Proceedings, verifier: VerifierOutput, letter: Answer | None = None) -> Contested:
    """The parametric-local consensus against the dynamic answer. `letter`: the verifier's own answer when it is the
    one kept (`answer_source = "verifier"`); it stands if the challenge fails, unless it is the challenger's."""
    default = p.bundle.candidate("parametric").answer
    challenger = p.bundle.candidate("dynamic").answer
    # audit_applies requires both answers
    assert default is not None
    assert challenger is not None
    # The audit keeps the verifier's route when it committed to an answer (needs_more_search did not).
    route = verifier.route
    kept_route: Route = route if route_spec(route).answer_from != "none" else route_for("agreement")
    kept = letter if letter is not None and letter != challenger else None
    trigger = "dynamic answer challenges the parametric-local consensus"
    return Contested(trigger, default, kept_route, challenger, verifier, kept)


def _audit_before(p: Proceedings, contest: Contested) -> Ruling | None:
    if judge_backs_challenger(p.bundle, contest.challenger) is False:
        return Ruling(
            "audit_rejected_option_not_supported",
            "challenge not considered: the option-wise judge did not find the dynamic evidence supporting "
            f"option {contest.challenger.display()}",
        )
    return None


def _audit_after(p: Proceedings, contest: Contested, round_: FollowUpRound | None) -> Ruling | None:
    quality, thresholds = audit_evidence_quality(p.bundle, round_), p.thresholds
    if audit_has_evidence(quality, thresholds):
        return None
    where = "in the follow-up" if round_ is not None else "in the web results"
    return Ruling(
        "audit_rejected_evidence_counts",
        f"challenge not considered: {quality.n_high} high and {quality.n_medium} medium sources {where} "
        f"(needs {thresholds.audit_min_high} high or {thresholds.audit_min_medium} medium)",
    )


def _audit_rule(assessment: Assessment) -> Ruling:
    assert isinstance(assessment, AuditAssessment)
    if audit_accepts(assessment):
        return Ruling(
            "audit_accepted", "the follow-up evidence clearly supports the challenger", True, {"audit": assessment}
        )
    return Ruling(
        "audit_rejected_not_clearly_supported",
        "the evidence does not clearly support the challenger",
        False,
        {"audit": assessment},
    )


AUDIT = ContestPolicy(
    mechanism="audit",
    label="Challenge audit",
    followup_trigger="challenge audit",
    before_followup=_audit_before,
    after_followup=_audit_after,
    assess=lambda actions: actions.assess_audit,
    rule_on=_audit_rule,
    assessment_failed=Ruling("audit_assessment_failed", "audit assessment failed; consensus kept"),
    # An accepted challenge is a medium-confidence revision; a rejected one keeps the verifier's confidence.
    confidence=lambda verifier, accepted: "medium" if accepted else verifier,
)
