"""The adjudication procedure (CLEAR 2.3 and A.2): verifier, bounded follow-up, override guard, challenge audit.

`adjudicate` is the whole control flow over typed records. Its side effects (LM judgements, searches) go
through an `AdjudicationActions` object: the live program supplies LM-backed actions, and threshold tuning
supplies actions replayed from a stored Decision, so both run exactly the same rules. When the thresholds carry
letter priors, it starts by dividing them out of the scored candidates (programs._letter_prior).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from clearmed.programs._agreement import letter_agreement
from clearmed.programs._calibrated import rescored_candidate
from clearmed.programs._letter_prior import (
    corrected_bundle,
    corrected_candidate,
    correction_outcome,
    uncorrected_candidates,
)
from clearmed.programs._quality_gate import effective_quality
from clearmed.programs.rules import (
    answer_for_route,
    answered,
    audit_accepts,
    audit_applies,
    audit_has_evidence,
    audit_skippable,
    followup_found_evidence,
    guard_applies,
    guard_confident_enough,
    guard_default,
    guard_grants,
    guard_may_search,
    heuristic_verify,
    is_unanimous,
    judge_backs_challenger,
    may_follow_up,
)
from clearmed.retrieval.quality import QualityPriors
from clearmed.signatures.records import (
    NEEDS_MORE_SEARCH,
    AdjudicationStep,
    Agreement,
    Answer,
    AuditAssessment,
    Confidence,
    EvidenceBundle,
    FollowUpRound,
    GuardAssessment,
    Route,
    RuleId,
    SourceQuality,
    StepError,
    Thresholds,
    VerifierOutput,
    route_for,
    route_spec,
)


class AdjudicationActions(Protocol):
    """The judgement calls the rules need. Implementations record failures instead of raising."""

    def verify(self, bundle: EvidenceBundle, agreement: Agreement) -> tuple[VerifierOutput, RuleId]: ...

    def follow_up(self, bundle: EvidenceBundle, trigger: str) -> FollowUpRound: ...

    def assess_guard(
        self, bundle: EvidenceBundle, default: Answer, challenger: Answer
    ) -> GuardAssessment | StepError: ...

    def assess_audit(
        self, bundle: EvidenceBundle, default: Answer, challenger: Answer
    ) -> AuditAssessment | StepError: ...


@dataclass(frozen=True)
class Mechanisms:
    """Which mechanisms are switched on (the paper's ablations switch them off one at a time)."""

    guard: bool = True
    audit: bool = True
    followup: bool = True


ALL_MECHANISMS = Mechanisms()


@dataclass
class Adjudicated:
    """The adjudication layer's result: d = (a*, z*, j*, gamma*, B*) plus its trail.

    `agreement` is the agreement of B*'s candidates: the one adjudication was given, recomputed when a follow-up
    round re-scored the dynamic pathway (the Decision stores this one, consistent with its bundle).
    """

    answer: Answer | None
    route: Route | None
    rationale: str
    confidence: Confidence
    rule: RuleId
    bundle: EvidenceBundle
    agreement: Agreement
    steps: list[AdjudicationStep] = field(default_factory=list)
    verifier_outputs: list[VerifierOutput] = field(default_factory=list)


def _with_round(bundle: EvidenceBundle, round_: FollowUpRound, thresholds: Thresholds) -> EvidenceBundle:
    """B' = Merge(B, E_follow, P_follow, S_follow). A round that re-scored the dynamic pathway also replaces the
    dynamic candidate by the re-scored one (letter-prior corrected like the initial candidates), and keeps the
    candidate it replaced on the round (`before_followups` puts it back)."""
    if round_.rescored is None:
        return bundle.model_copy(update={"followups": [*bundle.followups, round_]})
    original = bundle.candidate("dynamic")
    merged = round_.model_copy(update={"replaced": original})
    rescored = corrected_candidate(rescored_candidate(original, merged), thresholds)
    candidates = [rescored if c.pathway == "dynamic" else c for c in bundle.candidates]
    return bundle.model_copy(update={"candidates": candidates, "followups": [*bundle.followups, merged]})


def before_followups(bundle: EvidenceBundle, agreement: Agreement) -> tuple[EvidenceBundle, Agreement]:
    """The bundle and agreement adjudication started from, given those it ended with (a stored Decision's): no
    follow-up round, the dynamic candidate a re-scoring round replaced put back, and every candidate as its
    pathway scored it (before any letter-prior correction). That agreement is then recomputed from letter sets,
    which is how it was made: only single-answer MCQs are re-scored or corrected."""
    replaced = next((r.replaced for r in bundle.followups if r.replaced is not None), None)
    initial = bundle.model_copy(update={"followups": []})
    if replaced is None and all(c.uncorrected is None for c in bundle.candidates):
        return initial, agreement
    candidates = [replaced if c.pathway == "dynamic" and replaced is not None else c for c in bundle.candidates]
    initial = initial.model_copy(update={"candidates": uncorrected_candidates(candidates)})
    return initial, letter_agreement(initial)


def _followup_step(round_: FollowUpRound, trigger: str) -> AdjudicationStep:
    found = len(round_.passages)
    quality = round_.source_quality
    outcome = f"query {round_.query!r}: {found} results (high={quality.n_high}, medium={quality.n_medium})"
    if round_.query_cut_chars is not None:
        outcome += f"; the written query was cut from {round_.query_cut_chars} characters to the search's limit"
    if round_.rescored is not None:
        before = round_.replaced.answer if round_.replaced is not None else None
        outcome += (
            f"; dynamic pathway re-scored on them: {before.display() if before else '-'} -> "
            f"{Answer(letters=round_.rescored.letters).display()}"
        )
    return AdjudicationStep(mechanism="followup", trigger=trigger, outcome=outcome, error=round_.error)


def _verifier_step(output: VerifierOutput, rule: RuleId, trigger: str) -> AdjudicationStep:
    shown = output.answer.display() if output.answer else "-"
    return AdjudicationStep(
        mechanism="fallback" if output.mode == "heuristic" else "verifier",
        trigger=trigger,
        rule=rule,
        outcome=f"route {output.route}, answer {shown}, confidence {output.confidence}",
        answer=output.answer,
        route=output.route,
        verifier=output,
        error=output.error,
    )


def adjudicate(
    bundle: EvidenceBundle,
    agreement: Agreement,
    thresholds: Thresholds,
    actions: AdjudicationActions,
    mechanisms: Mechanisms = ALL_MECHANISMS,
    *,
    priors: QualityPriors | None = None,
) -> Adjudicated:
    """Run the procedure. `priors` (the config's quality priors) only matter when the thresholds' quality gate
    is on: the guard and audit then count labels through `effective_quality`."""

    def quality_of(current: EvidenceBundle) -> SourceQuality:
        return effective_quality(current, thresholds, priors)

    steps: list[AdjudicationStep] = []
    outputs: list[VerifierOutput] = []
    corrected = corrected_bundle(bundle, thresholds)
    if corrected is not bundle:  # every rule below reads the corrected answers (programs._letter_prior)
        bundle, agreement = corrected, letter_agreement(corrected)
        steps.append(
            AdjudicationStep(
                mechanism="calibration",
                rule="letter_prior_corrected",
                outcome=correction_outcome(bundle, thresholds.letter_prior_strength),
            )
        )
    if not answered(bundle):
        return Adjudicated(
            None, None, "no pathway produced an answer", "low", "no_pathway_answered", bundle, agreement, steps
        )

    if thresholds.unanimity_fast_path and is_unanimous(agreement):
        answer = bundle.candidate("parametric").answer
        steps.append(
            AdjudicationStep(
                mechanism="agreement",
                rule="unanimity_fast_path",
                answer=answer,
                route=route_for("agreement"),
                outcome="all three pathways agree; verifier skipped",
            )
        )
        return Adjudicated(
            answer,
            route_for("agreement"),
            "all three pathways agree",
            "high",
            "unanimity_fast_path",
            bundle,
            agreement,
            steps,
        )

    # 2.3.1 verifier, with bounded 2.3.3 follow-up rounds while it asks for more evidence.
    def verify(trigger: str) -> tuple[VerifierOutput, RuleId]:
        output, rule = actions.verify(bundle, agreement)
        outputs.append(output)
        steps.append(_verifier_step(output, rule, trigger))
        return output, rule

    def fall_back(trigger: str, why: RuleId) -> tuple[VerifierOutput, RuleId]:
        """The deterministic verifier decides; the step records why (`why`) and the heuristic rule it applied."""
        output, rule = heuristic_verify(bundle, agreement, quality_of(bundle), allow_more_search=False)
        outputs.append(output)
        outcome = f"deterministic verifier: {rule}"
        steps.append(
            AdjudicationStep(
                mechanism="fallback",
                trigger=trigger,
                rule=why,
                outcome=outcome,
                answer=output.answer,
                route=output.route,
                verifier=output,
            )
        )
        return output, rule

    rounds = 0
    output, rule = verify("initial bundle")
    while output.route == NEEDS_MORE_SEARCH:
        if mechanisms.followup and may_follow_up(rounds, thresholds):
            bundle = _with_round(bundle, actions.follow_up(bundle, "needs_more_search"), thresholds)
            round_ = bundle.followups[-1]
            if round_.rescored is not None:  # a new dynamic answer: every rule from here on compares it
                agreement = letter_agreement(bundle)
            rounds += 1
            steps.append(_followup_step(round_, f"needs_more_search (round {rounds})"))
            output, rule = verify(f"bundle after follow-up round {rounds}")
            continue
        output, rule = fall_back("needs_more_search with no follow-up left", "followup_bound_reached")
        break

    answer = answer_for_route(output.route, bundle, agreement)
    if answer is None:  # a route the candidates cannot back (possible in replayed records): stay conservative
        output, rule = fall_back("verifier route not backed by any candidate", "route_not_backed")
        answer = answer_for_route(output.route, bundle, agreement)
    route: Route = output.route
    rationale = output.rationale
    confidence: Confidence = output.confidence

    if mechanisms.guard and guard_applies(route, bundle, agreement):
        return _run_guard(
            bundle, agreement, thresholds, actions, mechanisms, steps, outputs, rationale, confidence, quality_of
        )
    if mechanisms.audit and audit_applies(route, agreement):
        return _run_audit(
            bundle, agreement, thresholds, actions, mechanisms, steps, outputs, route, rationale, confidence, quality_of
        )
    return Adjudicated(answer, route, rationale, confidence, rule, bundle, agreement, steps, outputs)


@dataclass(frozen=True)
class _Contest:
    """A default answer contested by the dynamic challenger; the guard or the audit settles it."""

    mechanism: Literal["guard", "audit"]
    trigger: str
    default: Answer
    default_route: Route
    challenger: Answer

    def settle(
        self,
        rule: RuleId,
        outcome: str,
        revised: bool,
        confidence: Confidence,
        bundle: EvidenceBundle,
        agreement: Agreement,
        steps: list[AdjudicationStep],
        outputs: list[VerifierOutput],
        rationale: str,
        **recorded: object,
    ) -> Adjudicated:
        """Record the step (with the guard/audit assessment or error in `recorded`) and conclude."""
        answer, route = self.default, self.default_route
        if revised:
            answer, route = self.challenger, route_for("dynamic")
        steps.append(
            AdjudicationStep(
                mechanism=self.mechanism,
                trigger=self.trigger,
                rule=rule,
                outcome=outcome,
                answer=answer,
                route=route,
                **recorded,  # type: ignore[arg-type]
            )
        )
        label = "Override guard" if self.mechanism == "guard" else "Challenge audit"
        return Adjudicated(
            answer,
            route,
            f"{label}: {outcome}. {rationale}".strip(),
            confidence,
            rule,
            bundle,
            agreement,
            steps,
            outputs,
        )


def _run_guard(
    bundle: EvidenceBundle,
    agreement: Agreement,
    thresholds: Thresholds,
    actions: AdjudicationActions,
    mechanisms: Mechanisms,
    steps: list[AdjudicationStep],
    outputs: list[VerifierOutput],
    rationale: str,
    confidence: Confidence,
    quality_of: Callable[[EvidenceBundle], SourceQuality],
) -> Adjudicated:
    default, default_route = guard_default(bundle, agreement)
    challenger = bundle.candidate("dynamic").answer
    assert challenger is not None  # guard_applies requires a dynamic answer
    trigger = "verifier proposed accept_dynamic against " + (
        "the parametric-local consensus" if agreement.parametric_local else "the other pathways"
    )

    contest = _Contest("guard", trigger, default, default_route, challenger)

    def finish(rule: RuleId, outcome: str, granted: bool, **recorded: object) -> Adjudicated:
        confidence_now: Confidence = confidence if granted else "medium"
        return contest.settle(
            rule, outcome, granted, confidence_now, bundle, agreement, steps, outputs, rationale, **recorded
        )

    if not guard_confident_enough(confidence, thresholds):
        return finish(
            "guard_rejected_low_confidence",
            f"override rejected without follow-up: verifier confidence {confidence} "
            f"(needs {thresholds.accept_dynamic_min_confidence})",
            granted=False,
        )
    if judge_backs_challenger(bundle, challenger) is False:
        return finish(
            "guard_rejected_option_not_supported",
            "override rejected without follow-up: the option-wise judge did not find the dynamic evidence "
            f"supporting option {challenger.display()}",
            granted=False,
        )
    quality = quality_of(bundle)
    if not guard_may_search(quality, thresholds):
        return finish(
            "guard_rejected_few_high_quality",
            f"override rejected without follow-up: {quality.n_high} high-quality sources "
            f"(needs {thresholds.guard_min_high})",
            granted=False,
        )
    if mechanisms.followup:
        round_ = actions.follow_up(bundle, "guard")
        bundle = _with_round(bundle, round_, thresholds)
        steps.append(_followup_step(round_, "override guard"))
        if not followup_found_evidence(round_):
            why = (
                "failed"
                if round_.error is not None and round_.error.stage == "followup_search"
                else "found nothing new"
            )
            return finish(
                "guard_rejected_no_followup_evidence",
                f"override rejected: the follow-up search {why}, so there is no new evidence to grant it on",
                granted=False,
            )
    assessment = actions.assess_guard(bundle, default, challenger)
    if isinstance(assessment, StepError):
        return finish(
            "guard_assessment_failed",
            "guard assessment failed; default kept",
            granted=False,
            error=assessment,
        )
    if guard_grants(assessment):
        return finish(
            "guard_granted",
            "all five override conditions hold; override granted",
            granted=True,
            guard=assessment,
        )
    failed = [name for name, held in assessment.model_dump(exclude={"rationale"}).items() if not held]
    return finish(
        "guard_rejected_conditions",
        f"override rejected: not {', not '.join(failed)}",
        granted=False,
        guard=assessment,
    )


def _run_audit(
    bundle: EvidenceBundle,
    agreement: Agreement,
    thresholds: Thresholds,
    actions: AdjudicationActions,
    mechanisms: Mechanisms,
    steps: list[AdjudicationStep],
    outputs: list[VerifierOutput],
    route: Route,
    rationale: str,
    confidence: Confidence,
    quality_of: Callable[[EvidenceBundle], SourceQuality],
) -> Adjudicated:
    default = bundle.candidate("parametric").answer
    challenger = bundle.candidate("dynamic").answer
    # audit_applies requires both answers
    assert default is not None
    assert challenger is not None
    # The audit keeps the verifier's route when it committed to an answer (needs_more_search did not).
    kept_route = route if route_spec(route).answer_from != "none" else route_for("agreement")
    trigger = "dynamic answer challenges the parametric-local consensus"

    contest = _Contest("audit", trigger, default, kept_route, challenger)

    def finish(rule: RuleId, outcome: str, accepted: bool, **recorded: object) -> Adjudicated:
        confidence_now: Confidence = "medium" if accepted else confidence
        return contest.settle(
            rule, outcome, accepted, confidence_now, bundle, agreement, steps, outputs, rationale, **recorded
        )

    if audit_skippable(confidence, thresholds):
        return finish(
            "audit_skipped_confident_consensus",
            f"challenge not audited: the verifier kept the consensus with {confidence} confidence "
            f"(audit skipped from {thresholds.audit_skip_confidence})",
            accepted=False,
        )
    if judge_backs_challenger(bundle, challenger) is False:
        return finish(
            "audit_rejected_option_not_supported",
            "challenge not considered: the option-wise judge did not find the dynamic evidence supporting "
            f"option {challenger.display()}",
            accepted=False,
        )
    if mechanisms.followup:
        round_ = actions.follow_up(bundle, "audit")
        bundle = _with_round(bundle, round_, thresholds)
        steps.append(_followup_step(round_, "challenge audit"))
    quality = quality_of(bundle)
    if not audit_has_evidence(quality, thresholds):
        return finish(
            "audit_rejected_evidence_counts",
            f"challenge not considered: {quality.n_high} high and {quality.n_medium} medium sources "
            f"(needs {thresholds.audit_min_high} high or {thresholds.audit_min_medium} medium)",
            accepted=False,
        )
    assessment = actions.assess_audit(bundle, default, challenger)
    if isinstance(assessment, StepError):
        return finish(
            "audit_assessment_failed",
            "audit assessment failed; consensus kept",
            accepted=False,
            error=assessment,
        )
    if audit_accepts(assessment):
        return finish(
            "audit_accepted",
            "the follow-up evidence clearly supports the challenger",
            accepted=True,
            audit=assessment,
        )
    return finish(
        "audit_rejected_not_clearly_supported",
        "the evidence does not clearly support the challenger",
        accepted=False,
        audit=assessment,
    )
