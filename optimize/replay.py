"""Replay the adjudication layer over a stored Decision: new thresholds or switches, zero new LM calls.

A Decision keeps the bundle as the pathways left it, each follow-up round beside it, the agreement adjudication
started from, every verifier output and every guard/audit assessment, each with what it judged.
`replay_decision` runs the same `adjudicate` procedure as the live program from the record as written (its bundle
without the follow-up rounds), with actions served from those records.

Replay is exact or a miss. A recorded judgement is reused only for what it judged: a verifier output for the
same answers, agreement and number of follow-up rounds, a guard or audit assessment for the same default,
challenger and number of rounds, a follow-up round only beside rounds that leave it the same pages (a round left
out the pages the bundle already held: `FollowUpRound.excluded`), so that a ruling made on the round before any
assessment (its evidence counts) is the live one; an audit only if it was asked every condition it rules on.
Anything else (a branch the original run never took) cannot be served:
replay then either raises `ReplayMiss`, or asks the `live` actions supplied by the caller (an LM-backed program,
whose calls DSPy's cache makes free on a second visit). The calibrated verifier is not served but recomputed under
the replayed weights: pure arithmetic over the recorded distributions.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from clearmed.programs.adjudication import ALL_MECHANISMS, Adjudicated, AdjudicationActions, Mechanisms, adjudicate
from clearmed.programs.adjudication.calibrated import calibrated_verify
from clearmed.programs.adjudication.rules import guard_default
from clearmed.signatures.records import (
    NEEDS_MORE_SEARCH,
    AdjudicationStep,
    Agreement,
    Answer,
    AuditAssessment,
    Contest,
    Decision,
    EvidenceBundle,
    FollowUpRound,
    GuardAssessment,
    RuleId,
    StepError,
    Thresholds,
    VerifierInputs,
    VerifierOutput,
    page_key,
)


class ReplayMiss(LookupError):
    """The replayed procedure needs a judgement the original run never made."""


@dataclass(frozen=True)
class _Verification:
    output: VerifierOutput
    rule: RuleId
    inputs: VerifierInputs


@dataclass(frozen=True)
class _Assessment:
    judgement: GuardAssessment | AuditAssessment | StepError
    contest: Contest


def inputs_of(bundle: EvidenceBundle, agreement: Agreement) -> VerifierInputs:
    """What a verifier given this bundle and agreement reads (as `Proceedings.inputs` records it)."""
    answers = {c.pathway: c.answer for c in bundle.candidates}
    return VerifierInputs(answers=answers, agreement=agreement, followup_rounds=len(bundle.followups))


def _stored_verifications(decision: Decision) -> list[_Verification]:
    """The verifier outputs the actions gave, in order. A record written before steps named their inputs: the
    n-th verification read the bundle with its first n rounds (all needs_more_search rounds: verifications come
    before the guard or audit), which is what replay derives for it."""
    assert decision.agreement is not None
    internal = ("followup_bound_reached", "route_not_backed")  # decided by rules inside adjudicate, not actions
    found: list[_Verification] = []
    for step in decision.steps:
        if step.mechanism not in ("verifier", "fallback") or step.verifier is None or step.rule in internal:
            continue
        inputs = step.inputs
        if inputs is None:
            seen = decision.bundle.model_copy(update={"followups": decision.bundle.followups[: len(found)]})
            inputs = inputs_of(seen, decision.agreement)
        found.append(_Verification(step.verifier, step.rule, inputs))  # type: ignore[arg-type]
    return found


def _derived_contest(decision: Decision, step: AdjudicationStep) -> Contest | None:
    """What an older record's guard or audit assessment judged: the last action of its adjudication, made on the
    bundle with every round."""
    assert decision.agreement is not None
    bundle = decision.bundle
    challenger = bundle.candidate("dynamic").answer
    if step.mechanism == "guard":
        default: Answer | None = guard_default(bundle, decision.agreement)[0]
    else:
        default = bundle.candidate("parametric").answer
    if default is None or challenger is None:
        return None
    return Contest(default=default, challenger=challenger, followup_rounds=len(bundle.followups))


def _stored_assessment(decision: Decision, mechanism: str) -> _Assessment | None:
    failed = f"{mechanism}_assessment_failed"
    for step in decision.steps:
        if step.mechanism != mechanism:
            continue
        judgement: GuardAssessment | AuditAssessment | StepError | None = step.guard or step.audit
        if judgement is None and step.rule == failed:
            judgement = step.error
        if judgement is None:
            continue
        contest = step.contest or _derived_contest(decision, step)
        return _Assessment(judgement, contest) if contest is not None else None
    return None


@dataclass
class ReplayedActions:
    """AdjudicationActions served from one stored Decision, each judgement only for what it judged."""

    decision: Decision
    live: AdjudicationActions | None = None
    # The thresholds being replayed: a calibrated verifier is recomputed under them (its weights), not served.
    thresholds: Thresholds | None = None
    misses: list[str] = field(default_factory=list)
    # What the replayed procedure took from the record ("verify", "follow_up", "guard", "audit"), for its cost.
    served: Counter[str] = field(default_factory=Counter)
    _verifications: list[_Verification] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self._verifications = _stored_verifications(self.decision)

    def _miss(self, what: str) -> None:
        self.misses.append(what)
        if self.live is None:
            raise ReplayMiss(f"{self.decision.question_id}: the original run has no record of {what}")

    def verify(self, bundle: EvidenceBundle, agreement: Agreement) -> tuple[VerifierOutput, RuleId]:
        # A question the calibrated verifier decided once is decided by it in every round (its inputs are the same
        # kind throughout), also in a round the record lacks.
        first = self._verifications[0].output if self._verifications else None
        if first is not None and first.mode == "calibrated" and self.thresholds is not None:
            calibrated = calibrated_verify(bundle, agreement, self.thresholds)
            if calibrated is not None:  # pure arithmetic over the recorded distributions: no LM call
                self.served["verify"] += 1
                return calibrated
        # Verifications happen only in the needs_more_search loop: the n-th saw n rounds of that kind.
        rounds = sum(1 for r in bundle.followups if r.trigger == NEEDS_MORE_SEARCH)
        if rounds < len(self._verifications):
            recorded = self._verifications[rounds]
            if recorded.inputs == inputs_of(bundle, agreement):
                self.served["verify"] += 1
                return recorded.output, recorded.rule
            self._miss(f"a verification of these answers after {rounds} follow-up rounds (it verified others)")
        else:
            self._miss(f"a verification after {rounds} follow-up rounds")
        assert self.live is not None
        return self.live.verify(bundle, agreement)

    def follow_up(self, bundle: EvidenceBundle, trigger: str) -> FollowUpRound:
        used = sum(1 for r in bundle.followups if r.trigger == trigger)
        matching = [r for r in self.decision.bundle.followups if r.trigger == trigger]
        if used < len(matching):
            recorded = matching[used]
            if self._same_round_here(recorded, bundle):
                self.served["follow_up"] += 1
                return recorded
            self._miss(f"a {trigger} follow-up search beside these rounds (it was recorded beside others)")
        else:
            self._miss(f"a {trigger} follow-up search")
        assert self.live is not None
        return self.live.follow_up(bundle, trigger)

    def _same_round_here(self, recorded: FollowUpRound, bundle: EvidenceBundle) -> bool:
        """Whether the live search would return `recorded` beside `bundle`'s rounds: it would leave out exactly the
        pages the recorded one did. A round that did not record them is served only beside the rounds it had."""
        if recorded.excluded is None:
            position = next(i for i, r in enumerate(self.decision.bundle.followups) if r is recorded)
            return bundle.followups == self.decision.bundle.followups[:position]
        found = {page_key(p) for p in recorded.passages} | set(recorded.excluded)
        held = {page_key(p) for p in bundle.all_dynamic_passages()}
        return found & held == set(recorded.excluded)

    def _assessment(
        self, mechanism: str, bundle: EvidenceBundle, default: Answer, challenger: Answer
    ) -> GuardAssessment | AuditAssessment | StepError | None:
        """The recorded assessment of this contest, or None after counting the miss."""
        recorded = _stored_assessment(self.decision, mechanism)
        asked = Contest(default=default, challenger=challenger, followup_rounds=len(bundle.followups))
        what = f"{default.display()} against {challenger.display()} after {asked.followup_rounds} rounds"
        if recorded is not None and recorded.contest == asked:
            judgement = recorded.judgement
            if isinstance(judgement, GuardAssessment | AuditAssessment) and judgement.needs_reassessment():
                self._miss(f"a {mechanism} assessment of {what} with every condition (it was asked fewer)")
                return None
            self.served[mechanism] += 1
            return judgement
        self._miss(f"a {mechanism} assessment of {what}" + (" (it assessed another)" if recorded else ""))
        return None

    def assess_guard(self, bundle: EvidenceBundle, default: Answer, challenger: Answer) -> GuardAssessment | StepError:
        found = self._assessment("guard", bundle, default, challenger)
        if found is None:
            assert self.live is not None
            return self.live.assess_guard(bundle, default, challenger)
        assert not isinstance(found, AuditAssessment)
        return found

    def assess_audit(self, bundle: EvidenceBundle, default: Answer, challenger: Answer) -> AuditAssessment | StepError:
        found = self._assessment("audit", bundle, default, challenger)
        if found is None:
            assert self.live is not None
            return self.live.assess_audit(bundle, default, challenger)
        assert not isinstance(found, GuardAssessment)
        return found


def replay_decision(
    decision: Decision,
    thresholds: Thresholds,
    mechanisms: Mechanisms = ALL_MECHANISMS,
    *,
    live: AdjudicationActions | None = None,
) -> tuple[Adjudicated, ReplayedActions]:
    """Re-run the adjudication rules of one stored Decision under other thresholds or switches."""
    if decision.agreement is None:
        raise ReplayMiss(f"{decision.question_id}: the decision has no recorded agreement (not a CLEAR decision)")
    actions = ReplayedActions(decision, live=live, thresholds=thresholds)
    result = adjudicate(decision.bundle.initial(), decision.agreement, thresholds, actions, mechanisms)
    return result, actions
