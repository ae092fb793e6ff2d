"""Replay the adjudication layer over a stored Decision: new thresholds or switches, zero new LM calls.

A Decision keeps the candidates, passages, quality labels, agreement, every verifier output, every follow-up
round and every guard/audit assessment. `replay_decision` runs the same `adjudicate` procedure as the live
program, with actions served from those records. A branch the original run never took (a follow-up search
that was not issued, a guard assessment never asked for) cannot be served from the record: replay then
either raises `ReplayMiss`, or asks the `live` actions supplied by the caller (an LM-backed program, whose
calls DSPy's cache makes free on a second visit).

Replay starts from the bundle as the pathways left it (`before_followups`): no follow-up round, and the dynamic
candidate that a calibrated verifier's re-scoring round replaced put back. Serving that recorded round (with its
re-scored distribution) re-applies the replacement, so the calibrated verifier of a run recorded with
`calibrated_more_search_below` replays with no LM call at any threshold up to the recorded one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from clearmed.programs import calibrated_verify
from clearmed.programs.adjudication import (
    ALL_MECHANISMS,
    Adjudicated,
    AdjudicationActions,
    Mechanisms,
    adjudicate,
    before_followups,
)
from clearmed.retrieval.quality import QualityPriors
from clearmed.signatures.records import (
    NEEDS_MORE_SEARCH,
    Agreement,
    Answer,
    AuditAssessment,
    Decision,
    EvidenceBundle,
    FollowUpRound,
    GuardAssessment,
    RuleId,
    StepError,
    Thresholds,
    VerifierOutput,
)


class ReplayMiss(LookupError):
    """The replayed procedure needs a judgement the original run never made."""


@dataclass
class RecordedActions:
    """AdjudicationActions served from one stored Decision, in the order the original run used them."""

    decision: Decision
    live: AdjudicationActions | None = None
    # The thresholds being replayed: a calibrated verifier is recomputed under them (its weights), not served.
    thresholds: Thresholds | None = None
    # Whether the replayed mechanisms include follow-up searches (a calibrated verifier asks for none without).
    followup: bool = True
    misses: list[str] = field(default_factory=list)
    # What the replayed procedure took from the record: "verify", "follow_up", "guard", "audit", and "rescore" (a
    # needs_more_search round whose re-scoring of the dynamic pathway the run paid for), for cost accounting.
    served: Counter[str] = field(default_factory=Counter)
    _verifier_queue: list[tuple[VerifierOutput, RuleId]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        steps = [s for s in self.decision.steps if s.mechanism in ("verifier", "fallback") and s.verifier is not None]
        internal = ("followup_bound_reached", "route_not_backed")  # decided by rules inside adjudicate, not actions
        self._verifier_queue = [(s.verifier, s.rule) for s in steps if s.rule not in internal]  # type: ignore[misc]

    def _miss(self, what: str) -> None:
        self.misses.append(what)
        if self.live is None:
            raise ReplayMiss(f"{self.decision.question_id}: the original run has no record of {what}")

    def verify(self, bundle: EvidenceBundle, agreement: Agreement) -> tuple[VerifierOutput, RuleId]:
        # Verifications happen only in the needs_more_search loop: the n-th saw n merged rounds of that kind.
        rounds = sum(1 for r in bundle.followups if r.trigger == NEEDS_MORE_SEARCH)
        # A question the calibrated verifier decided once is decided by it in every round (its inputs are the same
        # kind throughout), also in a round the record lacks.
        first = self._verifier_queue[0][0] if self._verifier_queue else None
        if first is not None and first.mode == "calibrated" and self.thresholds is not None:
            calibrated = calibrated_verify(bundle, agreement, self.thresholds, may_search=self.followup)
            if calibrated is not None:  # pure arithmetic over the recorded distributions: no LM call
                self.served["verify"] += 1
                return calibrated
        if rounds < len(self._verifier_queue):
            self.served["verify"] += 1
            return self._verifier_queue[rounds]
        self._miss(f"a verification after {rounds} follow-up rounds")
        assert self.live is not None
        return self.live.verify(bundle, agreement)

    def follow_up(self, bundle: EvidenceBundle, trigger: str) -> FollowUpRound:
        used = sum(1 for r in bundle.followups if r.trigger == trigger)
        matching = [r for r in self.decision.bundle.followups if r.trigger == trigger]
        if used < len(matching):
            self.served["follow_up"] += 1
            if trigger == NEEDS_MORE_SEARCH:
                self.served["rescore"] += 1
            return matching[used]
        self._miss(f"a {trigger} follow-up search")
        assert self.live is not None
        return self.live.follow_up(bundle, trigger)

    def assess_guard(self, bundle: EvidenceBundle, default: Answer, challenger: Answer) -> GuardAssessment | StepError:
        for step in self.decision.steps:
            if step.mechanism == "guard" and (step.guard is not None or step.rule == "guard_assessment_failed"):
                self.served["guard"] += 1
                return step.guard if step.guard is not None else step.error  # type: ignore[return-value]
        self._miss("an override guard assessment")
        assert self.live is not None
        return self.live.assess_guard(bundle, default, challenger)

    def assess_audit(self, bundle: EvidenceBundle, default: Answer, challenger: Answer) -> AuditAssessment | StepError:
        for step in self.decision.steps:
            if step.mechanism == "audit" and (step.audit is not None or step.rule == "audit_assessment_failed"):
                self.served["audit"] += 1
                return step.audit if step.audit is not None else step.error  # type: ignore[return-value]
        self._miss("a challenge audit assessment")
        assert self.live is not None
        return self.live.assess_audit(bundle, default, challenger)


def replay_decision(
    decision: Decision,
    thresholds: Thresholds,
    mechanisms: Mechanisms = ALL_MECHANISMS,
    *,
    live: AdjudicationActions | None = None,
    priors: QualityPriors | None = None,
) -> tuple[Adjudicated, RecordedActions]:
    """Re-run the adjudication rules of one stored Decision under other thresholds or switches.

    `priors` are the run's quality priors (its config), used only when the thresholds' quality gate is on.
    """
    if decision.agreement is None:
        raise ReplayMiss(f"{decision.question_id}: the decision has no recorded agreement (not a CLEAR decision)")
    actions = RecordedActions(decision, live=live, thresholds=thresholds, followup=mechanisms.followup)
    bundle, agreement = before_followups(decision.bundle, decision.agreement)
    result = adjudicate(bundle, agreement, thresholds, actions, mechanisms, priors=priors)
    return result, actions
