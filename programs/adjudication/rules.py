"""CLEAR's decision rules as pure functions of typed records (paper section 2.3 and appendix A.2).

Nothing here calls an LM or reads LM prose: the rules see routes, answers compared as letter sets (or
by a recorded free-text agreement), quality counts and the boolean conditions of guard and audit
assessments. That makes every rule table-testable and lets threshold tuning replay them for free. Every rule
reads the candidates as the pathways produced them (`EvidenceBundle.candidate`).
"""

from __future__ import annotations

from clearmed.signatures.records import (
    PATHWAYS,
    Agreement,
    Answer,
    AuditAssessment,
    Candidate,
    Confidence,
    EvidenceBundle,
    FollowUpRound,
    GuardAssessment,
    OptionJudgment,
    PathwayName,
    Question,
    Route,
    RuleId,
    SourceQuality,
    Thresholds,
    VerifierOutput,
    VerifierVerdict,
    route_for,
    route_spec,
)

_PAIRS: dict[frozenset[PathwayName], str] = {
    frozenset({"parametric", "local"}): "parametric_local",
    frozenset({"parametric", "dynamic"}): "parametric_dynamic",
    frozenset({"local", "dynamic"}): "local_dynamic",
}


def agree(agreement: Agreement, first: PathwayName, second: PathwayName) -> bool | None:
    """Whether two pathways agree; None when either gave no answer."""
    if first == second:
        return True
    return getattr(agreement, _PAIRS[frozenset({first, second})])


def answered(bundle: EvidenceBundle) -> list[PathwayName]:
    return [c.pathway for c in bundle.candidates if c.answer is not None]


def is_unanimous(agreement: Agreement) -> bool:
    """All three pathways answered and agree pairwise."""
    return bool(agreement.parametric_local and agreement.parametric_dynamic and agreement.local_dynamic)


def left_out(bundle: EvidenceBundle) -> list[PathwayName]:
    """Pathways not run, by the user's choice (`StepError` kind `not_run`): neither answers nor failures."""
    return [c.pathway for c in bundle.candidates if c.error is not None and c.error.kind == "not_run"]


def every_run_pathway_agrees(bundle: EvidenceBundle, agreement: Agreement) -> bool:
    """Every pathway that was run answered, and all of them agree pairwise (at least one answered)."""
    ran = [c.pathway for c in bundle.candidates if c.pathway not in left_out(bundle)]
    answering = answered(bundle)
    if not answering or len(answering) != len(ran):
        return False
    return all(agree(agreement, first, second) for first in answering for second in answering)


def dynamic_is_isolated(bundle: EvidenceBundle, agreement: Agreement) -> bool:
    """The dynamic answer conflicts with every other answer there is (A.2: "conflicts with a competing
    conclusion"): dynamic answered, at least one other pathway answered, and none of them agrees with it."""
    others = [p for p in answered(bundle) if p != "dynamic"]
    if "dynamic" not in answered(bundle) or not others:
        return False
    return not any(agree(agreement, "dynamic", other) for other in others)


# ------------------------------------------------------------------------------------------- verifier route


def answer_for_route(route: Route, bundle: EvidenceBundle, agreement: Agreement) -> Answer | None:
    """The answer a route commits to, taken from the candidate records rather than from verifier prose.

    keep_parametric / keep_local / accept_dynamic select that pathway's answer; consensus selects the answer
    shared by at least two pathways (the verifier's answer breaks no ties: with three pathways at most one
    pair can agree without all three agreeing). None means the route is inconsistent with the candidates
    (for example keep_local when the local pathway gave no answer), which callers treat as a failed
    verification; needs_more_search has no answer yet.
    """
    source = route_spec(route).answer_from
    if source == "agreement":
        for pair, field in _PAIRS.items():
            if getattr(agreement, field):
                first = next(name for name in PATHWAYS if name in pair)
                return bundle.candidate(first).answer
        return None
    if source == "none":
        return None  # needs_more_search: no commitment yet
    return bundle.candidate(source).answer


def heuristic_verdict(route: Route, bundle: EvidenceBundle, agreement: Agreement) -> VerifierVerdict:
    """What the deterministic verifier can say of its own route, by letters alone, as the CLEAR code's
    `heuristic_verdict` says it: the web / the local answer supports it when it is the same answer; a conflict is
    an answering pathway against a consensus, or the dynamic answer against a kept one. The other fields need a
    reading of the evidence and stay unjudged."""
    answer_from = route_spec(route).answer_from
    held: frozenset[PathwayName] = frozenset({answer_from}) if answer_from in PATHWAYS else frozenset()
    if answer_from == "agreement":
        held = next((pair for pair, field in _PAIRS.items() if getattr(agreement, field)), frozenset())
    source = next((name for name in PATHWAYS if name in held), None)
    if source is None:
        return VerifierVerdict(web_supported=False, local_supported=False, conflict_detected=False)
    present = answered(bundle)
    differs = [name for name in present if agree(agreement, name, source) is False]
    conflict = bool(differs) if route == route_for("agreement") else "dynamic" in differs
    return VerifierVerdict(
        web_supported=agree(agreement, "dynamic", source) is True,
        local_supported=agree(agreement, "local", source) is True,
        conflict_detected=conflict,
    )


def single_usable_answer(bundle: EvidenceBundle) -> bool:
    """Exactly one pathway gave a usable answer (the others refused, failed or were left out)."""
    return len(answered(bundle)) == 1


def verifier_letter(output: VerifierOutput, bundle: EvidenceBundle) -> Answer | None:
    """The verifier's own answer where it is a valid one for the question (the CLEAR code's `final_pred`, kept by
    `answer_source = "verifier"`): None for the deterministic verifier (its answer is its route's), an answer the
    format gate would refuse, or none at all, and the route's answer is then taken."""
    if output.mode != "lm" or not gate_accepts(output.answer, bundle.question):
        return None
    return output.answer


def heuristic_verify(
    bundle: EvidenceBundle, agreement: Agreement, quality: SourceQuality, *, allow_more_search: bool = True
) -> tuple[VerifierOutput, RuleId]:
    """The deterministic verifier (the CLEAR code's fallback order):

    parametric = local -> consensus; local = dynamic -> consensus (confidence high only with a high-quality
    source); parametric = dynamic with a high-quality source -> consensus; else keep_local if local answered;
    else keep_parametric; else accept_dynamic; needs_more_search if nothing answered.
    """
    has_high = quality.n_high >= 1

    def out(route: Route, confidence: Confidence, rule: RuleId, rationale: str) -> tuple[VerifierOutput, RuleId]:
        answer = answer_for_route(route, bundle, agreement)
        verdict = heuristic_verdict(route, bundle, agreement)
        return VerifierOutput(
            answer=answer, route=route, rationale=rationale, confidence=confidence, mode="heuristic", verdict=verdict
        ), rule

    if agreement.parametric_local:
        confidence: Confidence = "high" if agreement.local_dynamic else "medium"
        return out("consensus", confidence, "heuristic_parametric_local", "parametric and local answers agree")
    if agreement.local_dynamic:
        confidence = "high" if has_high else "medium"
        return out("consensus", confidence, "heuristic_local_dynamic", "local and dynamic answers agree")
    if agreement.parametric_dynamic and has_high:
        return out(
            "consensus",
            "medium",
            "heuristic_parametric_dynamic_high_quality",
            "parametric and dynamic answers agree, with a high-quality web source",
        )
    present = answered(bundle)
    if "local" in present:
        return out("keep_local", "low", "heuristic_keep_local", "no agreement; the local answer is kept")
    if "parametric" in present:
        return out(
            "keep_parametric",
            "low",
            "heuristic_keep_parametric",
            "no agreement; the parametric answer is kept",
        )
    if "dynamic" in present:
        return out("accept_dynamic", "low", "heuristic_accept_dynamic", "only the dynamic pathway answered")
    route: Route = "needs_more_search" if allow_more_search else "keep_parametric"
    return VerifierOutput(
        answer=None, route=route, rationale="no pathway answered", confidence="low", mode="heuristic"
    ), "heuristic_nothing_answered"


# ------------------------------------------------------------------------------------------- override guard


def guard_applies(route: Route, bundle: EvidenceBundle, agreement: Agreement, letter: Answer | None = None) -> bool:
    """A.2: "The override guard is invoked when z0 = accept_dynamic and the dynamic candidate conflicts with
    a competing conclusion. In particular, when a_param = a_local != a_dynamic ...; when all three candidates
    differ ...": those two cases, as the CLEAR code guards them (`_apply_post_verifier_guards`: the
    direct-BM25 consensus and the three-way conflict). With the parametric or the local pathway failed there is
    neither, and the verifier's accept_dynamic stands unguarded.

    `letter` is the verifier's own answer when it is the one kept (`answer_source = "verifier"`): the code guards
    only a verdict whose letter is the online answer, and a letter that is not the dynamic answer overrides
    nothing the guard protects."""
    if not (route_spec(route).guard and dynamic_is_isolated(bundle, agreement)):
        return False
    if letter is not None and letter != bundle.candidate("dynamic").answer:
        return False
    return agreement.parametric_local is not None  # both answered: their consensus, or all three differ


def guard_default(bundle: EvidenceBundle, agreement: Agreement) -> tuple[Answer, Route]:
    """A.2: "when a_param = a_local != a_dynamic, the parametric-local consensus is treated as the default;
    when all three candidates differ, the parametric candidate is used as the default". A failed pathway
    leaves whichever of the two answered. The route returned with the default is keep_local for a
    consensus the curated corpus supports, else keep_parametric / keep_local for the answering pathway.
    """
    parametric: Candidate = bundle.candidate("parametric")
    local: Candidate = bundle.candidate("local")
    if agreement.parametric_local and parametric.answer is not None:
        return parametric.answer, route_for("local")
    if parametric.answer is not None:
        return parametric.answer, route_for("parametric")
    if local.answer is not None:
        return local.answer, route_for("local")
    raise ValueError("guard_default needs a parametric or local answer; guard_applies guarantees one")


def guard_may_search(quality: SourceQuality, thresholds: Thresholds) -> bool:
    """A.2: "A targeted follow-up search is issued only when the dynamic evidence includes at least one
    high-quality source (n_high >= 1); otherwise, the proposed override is rejected without further
    retrieval." The CLEAR code gates on a continuous `max_quality_score >= 0.8` instead; A.2 counts categorical
    labels "to avoid introducing an additional manually calibrated threshold", and clearmed follows the paper."""
    return quality.n_high >= thresholds.guard_min_high


def followup_found_evidence(round_: FollowUpRound) -> bool:
    """The guard's follow-up brought back at least one page the bundle did not already hold. A failed search or
    one that found only known pages adds nothing to assess: an override granted then would rest on evidence
    the follow-up never found (the initial pages already decided the route that asked for the guard)."""
    return bool(round_.passages)


def guard_followup_has_evidence(round_: FollowUpRound, thresholds: Thresholds) -> bool:
    """The follow-up's own pages include `guard_min_high` high-quality sources, as the CLEAR code's
    `allow_second_search_override` counts the second search's own sources (high_quality_count >= 1). A.2 states
    the n_high >= 1 bar for issuing the follow-up and is silent on what the follow-up must bring; the code's
    count contradicts nothing in it, and without it one new forum page could carry an override."""
    return followup_found_evidence(round_) and round_.source_quality.n_high >= thresholds.guard_min_high


def guard_grants(assessment: GuardAssessment) -> bool:
    """A.2: granted only when the follow-up assessment supports the challenger, establishes that the default
    is not better supported, is aligned with the query, supports the exact option, and leaves no material
    unresolved conflict: all five, no partial credit. The CLEAR code (`allow_second_search_override`) also needs
    its adjudicator's `recommend_override`, a sixth judgement the paper does not list; A.2's "granted only when"
    names the conditions that must hold and forbids none beyond them, so clearmed asks it too: one more way to
    refuse an override, never one more way to grant it."""
    return assessment.all_hold()


def option_support(judgment: OptionJudgment | None, answer: Answer | None) -> bool | None:
    """The paper's "support at the exact option level": every letter of `answer` judged supported.

    None when there is no judgement to consult (the judge was off, or the answer is free text).
    """
    if judgment is None or answer is None or not answer.letters:
        return None
    return all(
        (v := judgment.verdict_for(letter)) is not None and v.verdict == "supported" for letter in answer.letters
    )


def judge_backs_challenger(bundle: EvidenceBundle, challenger: Answer) -> bool | None:
    """The paper's "support at the exact option level", from the option-wise judge when it answered the
    dynamic pathway: every challenger option judged supported with valid citations. None when there is no
    judgement, and then the guard/audit assessment alone decides. Verdicts never change during adjudication,
    so a False vetoes the override (or challenge) before any follow-up search is spent on it."""
    return option_support(bundle.candidate("dynamic").judgment, challenger)


# ------------------------------------------------------------------------------------------- challenge audit


def audit_applies(route: Route, agreement: Agreement) -> bool:
    """A.2: invoked "when the verifier does not initially accept the dynamic candidate, but the dynamic
    pathway challenges an existing parametric-local consensus, a_param = a_local != a_dynamic". The CLEAR code
    (`_apply_online_challenge_audit`) audits that pattern whatever the verifier decided; the paper leaves
    accept_dynamic to the guard, and clearmed follows the paper."""
    return route_spec(route).audit and agreement.parametric_local is True and agreement.parametric_dynamic is False


def audit_has_evidence(quality: SourceQuality, thresholds: Thresholds) -> bool:
    """A.2: "The challenge is considered only when the retrieved evidence contains at least one
    high-quality source or at least two medium-quality sources (n_high >= 1 or n_medium >= 2)." The evidence is
    the audit's own follow-up round (`audit_evidence_quality`)."""
    return quality.n_high >= thresholds.audit_min_high or quality.n_medium >= thresholds.audit_min_medium


def audit_evidence_quality(bundle: EvidenceBundle, round_: FollowUpRound | None) -> SourceQuality:
    """What the audit's evidence counts: "a targeted follow-up search is used to determine whether sufficient
    evidence exists" (A.2), so the follow-up's own sources, as the CLEAR code's `_allow_online_challenge_override`
    counts the second search's sources; a failed or empty follow-up counts nothing. With follow-up switched off
    (an ablation) the initial web results are the only retrieved evidence."""
    return round_.source_quality if round_ is not None else bundle.source_quality


def audit_accepts(assessment: AuditAssessment) -> bool:
    """A.2: the challenge is accepted only if "the follow-up evidence ... clearly support[s] the challenger";
    with the CLEAR code's conditions (`_allow_online_challenge_override`): aligned with the question, at the exact
    option, the default not the best supported, no unresolved conflict, and its adjudicator's
    `recommend_override`. The paper's "clearly" admits none of those failing, so the two agree."""
    return assessment.accepts()


# ------------------------------------------------------------------------------------------- follow-up


def may_follow_up(rounds_done: int, thresholds: Thresholds) -> bool:
    """Section 2.3.3: follow-up retrieval for needs_more_search is bounded by max_followup_rounds."""
    return rounds_done < thresholds.max_followup_rounds


def competing_answers(bundle: EvidenceBundle) -> list[tuple[PathwayName, Answer]]:
    """Distinct answers in play, first pathway to give each: what a targeted follow-up query must separate."""
    seen: list[tuple[PathwayName, Answer]] = []
    for candidate in bundle.candidates:
        if candidate.answer is not None and all(candidate.answer != answer for _, answer in seen):
            seen.append((candidate.pathway, candidate.answer))
    return seen


def gate_accepts(answer: Answer | None, question: Question) -> bool:
    """Single: exactly one valid letter. Multi: a non-empty set of valid letters. Free text: some text."""
    if answer is None:
        return False
    if question.answer_mode == "free_text":
        return bool(answer.text)
    valid = set(question.options or {})
    if not answer.letters or not set(answer.letters) <= valid:
        return False
    return question.answer_mode == "multi" or len(answer.letters) == 1
