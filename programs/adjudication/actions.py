"""What adjudication works with: the actions that make its judgements, the mechanisms switched on, its result, and
the state of one adjudication under way (`Proceedings`: the bundle with its rounds so far, and the trail).

The LM's judgements (verifier output, follow-up rounds, guard and audit assessments) come through an
`AdjudicationActions` object: the live program supplies LM-backed actions (`programs.clear.LiveActions`), and
replay supplies actions served from a stored Decision (`optimize.replay`), so both run exactly the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from clearmed.programs.adjudication.rules import heuristic_verify
from clearmed.signatures.records import (
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
    StepError,
    Thresholds,
    VerifierInputs,
    VerifierOutput,
)

# Where the verifier's answer comes from: `[program] answer_source` (signatures.records.settings).
AnswerPolicy = Literal["route", "verifier"]


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
    """Which mechanisms are switched on (the paper's ablations switch them off one at a time), and where the LM
    verifier's answer comes from (`[program] answer_source`: the route's pathway, the paper's, or the verifier's own
    letter, the CLEAR code's)."""

    guard: bool = True
    audit: bool = True
    followup: bool = True
    answer_source: AnswerPolicy = "route"


ALL_MECHANISMS = Mechanisms()


@dataclass
class Adjudicated:
    """The adjudication layer's result: d = (a*, z*, j*, gamma*, B*) plus its trail.

    `bundle` is the bundle adjudication was given with every follow-up round beside it, and `agreement` the one
    it was given: the Decision stores both as they are.
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


@dataclass
class Proceedings:
    """One adjudication under way: the bundle with the rounds so far, the agreement it was given, the trail."""

    bundle: EvidenceBundle
    agreement: Agreement
    thresholds: Thresholds
    actions: AdjudicationActions
    mechanisms: Mechanisms
    steps: list[AdjudicationStep] = field(default_factory=list)
    outputs: list[VerifierOutput] = field(default_factory=list)

    def inputs(self) -> VerifierInputs:
        answers = {c.pathway: c.answer for c in self.bundle.candidates}
        return VerifierInputs(answers=answers, agreement=self.agreement, followup_rounds=len(self.bundle.followups))

    def verify(self, trigger: str) -> tuple[VerifierOutput, RuleId]:
        """o = V(B), by the actions; the step records what the verifier read."""
        inputs = self.inputs()
        output, rule = self.actions.verify(self.bundle, self.agreement)
        self.outputs.append(output)
        shown = output.answer.display() if output.answer else "-"
        step = AdjudicationStep(
            mechanism="fallback" if output.mode == "heuristic" else "verifier",
            trigger=trigger,
            rule=rule,
            outcome=f"route {output.route}, answer {shown}, confidence {output.confidence}",
            answer=output.answer,
            route=output.route,
            verifier=output,
            error=output.error,
            inputs=inputs,
        )
        self.steps.append(step)
        return output, rule

    def fall_back(self, trigger: str, why: RuleId) -> tuple[VerifierOutput, RuleId]:
        """The deterministic verifier decides; the step records why (`why`) and the heuristic rule it applied."""
        quality = self.bundle.dynamic_quality()
        output, rule = heuristic_verify(self.bundle, self.agreement, quality, allow_more_search=False)
        self.outputs.append(output)
        step = AdjudicationStep(
            mechanism="fallback",
            trigger=trigger,
            rule=why,
            outcome=f"deterministic verifier: {rule}",
            answer=output.answer,
            route=output.route,
            verifier=output,
        )
        self.steps.append(step)
        return output, rule

    def follow_up(self, trigger: str, step_trigger: str) -> FollowUpRound:
        """One follow-up round by the actions, added beside the bundle and to the trail."""
        round_ = self.actions.follow_up(self.bundle, trigger)
        self.bundle = with_round(self.bundle, round_)
        self.steps.append(followup_step(round_, step_trigger))
        return round_

    def conclude(
        self, answer: Answer | None, route: Route | None, rationale: str, confidence: Confidence, rule: RuleId
    ) -> Adjudicated:
        return Adjudicated(
            answer, route, rationale, confidence, rule, self.bundle, self.agreement, self.steps, self.outputs
        )


# Follow-up bookkeeping (CLEAR 2.3.3): a round is added beside the bundle, never merged into its candidates.
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
