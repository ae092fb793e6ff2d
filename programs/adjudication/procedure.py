"""The adjudication procedure (CLEAR 2.3 and A.2): verifier, bounded follow-up, override guard, challenge audit.

`adjudicate` is the whole control flow over typed records; the LM's judgements come through the actions
(`actions.AdjudicationActions`). The bundle it is given is never changed: each follow-up round is added
beside it, and the result carries that bundle and the agreement it was given, which is what a Decision stores
and replay starts from.
"""

from __future__ import annotations

from clearmed.programs.adjudication.actions import (
    ALL_MECHANISMS,
    Adjudicated,
    AdjudicationActions,
    Mechanisms,
    Proceedings,
)
from clearmed.programs.adjudication.contest import AUDIT, GUARD, audit_contest, guard_contest, run_contest
from clearmed.programs.adjudication.rules import (
    answer_for_route,
    answered,
    audit_applies,
    every_run_pathway_agrees,
    guard_applies,
    is_unanimous,
    left_out,
    may_follow_up,
    single_usable_answer,
    verifier_letter,
)
from clearmed.signatures.records import (
    NEEDS_MORE_SEARCH,
    AdjudicationStep,
    Agreement,
    EvidenceBundle,
    RuleId,
    Thresholds,
    VerifierOutput,
    route_for,
)


def adjudicate(
    bundle: EvidenceBundle,
    agreement: Agreement,
    thresholds: Thresholds,
    actions: AdjudicationActions,
    mechanisms: Mechanisms = ALL_MECHANISMS,
) -> Adjudicated:
    """Run the procedure over the pathways' bundle and their agreement."""
    p = Proceedings(bundle, agreement, thresholds, actions, mechanisms)
    if not answered(bundle):
        return p.conclude(None, None, "no pathway produced an answer", "low", "no_pathway_answered")
    if thresholds.unanimity_fast_path and is_unanimous(agreement):
        return _unanimous(p)
    if left_out(bundle) and every_run_pathway_agrees(bundle, agreement):
        return _run_pathways_agree(p)
    if mechanisms.answer_source == "route" and single_usable_answer(bundle):
        return _single_answer(p)
    output, rule = _verify_with_followups(p)
    answer = answer_for_route(output.route, p.bundle, p.agreement)
    letter = verifier_letter(output, p.bundle) if mechanisms.answer_source == "verifier" else None
    if letter is not None and letter != answer:
        answer, rule = letter, "verifier_letter_kept"
    if answer is None:  # a route the candidates cannot back (possible in replayed records): stay conservative
        output, rule = p.fall_back("verifier route not backed by any candidate", "route_not_backed")
        answer = answer_for_route(output.route, p.bundle, p.agreement)
    if mechanisms.guard and guard_applies(output.route, p.bundle, p.agreement, letter):
        return run_contest(GUARD, p, guard_contest(p, output))
    if mechanisms.audit and audit_applies(output.route, p.agreement):
        return run_contest(AUDIT, p, audit_contest(p, output, letter))
    return p.conclude(answer, output.route, output.rationale, output.confidence, rule)


def _single_answer(p: Proceedings) -> Adjudicated:
    """One pathway gave a usable answer and the others refused, failed or were left out: every route the verifier
    could take commits to that answer or to none (consensus has no pair, the guard and the audit no contest, and a
    follow-up round never changes a candidate), so no verifier is asked (a recorded pathway's refusal cost the
    embedded model about 20 s a question for a decision already made). Under `answer_source = "verifier"` the
    verifier's own letter could differ, so it is still asked there."""
    candidate = next(c for c in p.bundle.candidates if c.answer is not None)
    route = route_for(candidate.pathway)
    others = ", ".join(c.pathway for c in p.bundle.candidates if c.answer is None) or "none"
    outcome = f"only {candidate.pathway} answered (no usable answer from: {others}); verifier skipped"
    p.steps.append(
        AdjudicationStep(
            mechanism="agreement", rule="single_usable_answer", answer=candidate.answer, route=route, outcome=outcome
        )
    )
    return p.conclude(candidate.answer, route, f"only {candidate.pathway} answered", "low", "single_usable_answer")


def _unanimous(p: Proceedings) -> Adjudicated:
    """The optional fast path: all three pathways agree, so the verifier is skipped."""
    return _agreed(p, "unanimity_fast_path", "all three pathways agree")


def _run_pathways_agree(p: Proceedings) -> Adjudicated:
    """Pathways were left out by choice (recorded runs: `--pathway dynamic=absent`) and every one that ran answered
    alike. No route can then give another answer: keep and consensus routes name the same one, accept_dynamic has no
    dynamic answer to back it, and the guard and the audit need a dynamic challenger. So no LM is asked."""
    ran = ", ".join(c.pathway for c in p.bundle.candidates if c.answer is not None)
    return _agreed(p, "run_pathways_agree", "every pathway run agrees", f"{ran}; the others were left out")


def _agreed(p: Proceedings, rule: RuleId, rationale: str, detail: str = "") -> Adjudicated:
    """Conclude on the answer the pathways agree on, as consensus, with the verifier skipped."""
    answer = next(c.answer for c in p.bundle.candidates if c.answer is not None)
    consensus = route_for("agreement")
    outcome = f"{rationale} ({detail}); verifier skipped" if detail else f"{rationale}; verifier skipped"
    p.steps.append(AdjudicationStep(mechanism="agreement", rule=rule, answer=answer, route=consensus, outcome=outcome))
    return p.conclude(answer, consensus, rationale, "high", rule)


def _verify_with_followups(p: Proceedings) -> tuple[VerifierOutput, RuleId]:
    """2.3.1 the verifier, with bounded 2.3.3 follow-up rounds while it asks for more evidence."""
    rounds = 0
    output, rule = p.verify("initial bundle")
    while output.route == NEEDS_MORE_SEARCH:
        if not (p.mechanisms.followup and may_follow_up(rounds, p.thresholds)):
            return p.fall_back("needs_more_search with no follow-up left", "followup_bound_reached")
        rounds += 1
        p.follow_up(NEEDS_MORE_SEARCH, f"needs_more_search (round {rounds})")
        output, rule = p.verify(f"bundle after follow-up round {rounds}")
    return output, rule
