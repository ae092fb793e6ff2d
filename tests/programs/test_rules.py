"""Table-driven tests of the pure adjudication rules (CLEAR appendix A.2)."""

from __future__ import annotations

import pytest

from clearmed.programs.adjudication import rules
from clearmed.programs.assessors.agreement import letter_agreement
from clearmed.signatures.records import (
    Agreement,
    Answer,
    AuditAssessment,
    Candidate,
    EvidenceBundle,
    GuardAssessment,
    QualityAssessment,
    SourceQuality,
    StepError,
    Thresholds,
)
from clearmed.testing import QUESTION


def bundle(parametric: str | None, local: str | None, dynamic: str | None) -> EvidenceBundle:
    def candidate(pathway: str, letter: str | None) -> Candidate:
        if letter is None:
            return Candidate(pathway=pathway, error=StepError(stage=pathway, kind="lm_error", message="down"))  # type: ignore[arg-type]
        return Candidate(pathway=pathway, answer=Answer.of_letters(letter))  # type: ignore[arg-type]

    return EvidenceBundle(
        question=QUESTION,
        candidates=[candidate("parametric", parametric), candidate("local", local), candidate("dynamic", dynamic)],
    )


def quality(high: int = 0, medium: int = 0, low: int = 0) -> SourceQuality:
    labels = ["high"] * high + ["medium"] * medium + ["low"] * low
    return SourceQuality(
        assessments=[QualityAssessment(passage_id=f"W{i}", label=label) for i, label in enumerate(labels)]  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        (("A", "A", "A"), (True, True, True)),
        (("A", "A", "B"), (True, False, False)),
        (("A", "B", "A"), (False, True, False)),
        (("A", "B", "C"), (False, False, False)),
        (("A", None, "A"), (None, True, None)),
    ],
)
def test_letter_agreement(answers: tuple, expected: tuple) -> None:
    agreement = letter_agreement(bundle(*answers))
    assert (agreement.parametric_local, agreement.parametric_dynamic, agreement.local_dynamic) == expected


@pytest.mark.parametrize(
    ("answers", "high", "expected_route", "expected_answer", "expected_confidence", "expected_rule"),
    [
        (("A", "A", "B"), 0, "consensus", "A", "medium", "heuristic_parametric_local"),
        (("A", "A", "A"), 0, "consensus", "A", "high", "heuristic_parametric_local"),
        (("A", "B", "B"), 0, "consensus", "B", "medium", "heuristic_local_dynamic"),
        (("A", "B", "B"), 1, "consensus", "B", "high", "heuristic_local_dynamic"),
        (("A", "B", "A"), 1, "consensus", "A", "medium", "heuristic_parametric_dynamic_high_quality"),
        (("A", "B", "A"), 0, "keep_local", "B", "low", "heuristic_keep_local"),
        (("A", "B", "C"), 5, "keep_local", "B", "low", "heuristic_keep_local"),
        (("A", None, "C"), 0, "keep_parametric", "A", "low", "heuristic_keep_parametric"),
        ((None, None, "C"), 0, "accept_dynamic", "C", "low", "heuristic_accept_dynamic"),
        ((None, None, None), 0, "needs_more_search", None, "low", "heuristic_nothing_answered"),
    ],
)
def test_heuristic_verifier_follows_the_clear_code_fallback_order(
    answers: tuple,
    high: int,
    expected_route: str,
    expected_answer: str | None,
    expected_confidence: str,
    expected_rule: str,
) -> None:
    b = bundle(*answers)
    output, rule = rules.heuristic_verify(b, letter_agreement(b), quality(high=high))
    assert output.route == expected_route
    assert (output.answer.display() if output.answer else None) == expected_answer
    assert output.confidence == expected_confidence
    assert rule == expected_rule
    assert output.mode == "heuristic"


def test_heuristic_verifier_without_more_search_never_asks_for_it() -> None:
    b = bundle(None, None, None)
    output, _ = rules.heuristic_verify(b, letter_agreement(b), quality(), allow_more_search=False)
    assert output.route != "needs_more_search"


@pytest.mark.parametrize(
    ("answers", "route", "applies"),
    [
        (("A", "A", "B"), "accept_dynamic", True),  # dynamic against the parametric-local consensus
        (("A", "B", "C"), "accept_dynamic", True),  # all three differ
        # The local pathway failed: the CLEAR code guards only the two cases A.2 names, so accept_dynamic stands.
        (("A", None, "C"), "accept_dynamic", False),
        ((None, "A", "C"), "accept_dynamic", False),
        (("A", "B", "B"), "accept_dynamic", False),  # local backs dynamic: no conflict to guard
        (("B", "A", "B"), "accept_dynamic", False),
        (("A", "A", "B"), "keep_local", False),  # the verifier did not propose an override
        ((None, None, "B"), "accept_dynamic", False),  # nothing to defend
    ],
)
def test_guard_applies(answers: tuple, route: str, applies: bool) -> None:
    b = bundle(*answers)
    assert rules.guard_applies(route, b, letter_agreement(b)) is applies  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("answers", "default", "route"),
    [
        (("A", "A", "B"), "A", "keep_local"),
        (("A", "C", "B"), "A", "keep_parametric"),
        (("A", None, "B"), "A", "keep_parametric"),
        ((None, "C", "B"), "C", "keep_local"),
    ],
)
def test_guard_default(answers: tuple, default: str, route: str) -> None:
    b = bundle(*answers)
    answer, default_route = rules.guard_default(b, letter_agreement(b))
    assert (answer.display(), default_route) == (default, route)


@pytest.mark.parametrize(("high", "min_high", "allowed"), [(0, 1, False), (1, 1, True), (2, 3, False), (0, 0, True)])
def test_guard_follow_up_needs_enough_high_quality_sources(high: int, min_high: int, allowed: bool) -> None:
    assert rules.guard_may_search(quality(high=high, medium=5), Thresholds(guard_min_high=min_high)) is allowed


@pytest.mark.parametrize("failing", sorted(GuardAssessment.model_fields.keys() - {"rationale"}))
def test_guard_grants_only_when_all_six_conditions_hold(failing: str) -> None:
    conditions = {name: True for name in GuardAssessment.model_fields if name != "rationale"}
    assert rules.guard_grants(GuardAssessment(**conditions))
    conditions[failing] = False
    assert not rules.guard_grants(GuardAssessment(**conditions))


@pytest.mark.parametrize(
    ("answers", "route", "applies"),
    [
        (("A", "A", "B"), "consensus", True),
        (("A", "A", "B"), "keep_local", True),
        (("A", "A", "B"), "needs_more_search", True),
        (("A", "A", "B"), "accept_dynamic", False),  # that is the guard's case
        (("A", "A", "A"), "consensus", False),
        (("A", "B", "C"), "keep_parametric", False),  # no consensus to challenge
        (("A", "A", None), "consensus", False),  # no challenger
    ],
)
def test_audit_applies(answers: tuple, route: str, applies: bool) -> None:
    assert rules.audit_applies(route, letter_agreement(bundle(*answers))) is applies  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("high", "medium", "considered"),
    [(0, 0, False), (1, 0, True), (0, 1, False), (0, 2, True), (0, 3, True)],
)
def test_audit_evidence_counts(high: int, medium: int, considered: bool) -> None:
    assert rules.audit_has_evidence(quality(high=high, medium=medium, low=4), Thresholds()) is considered


@pytest.mark.parametrize(
    ("clear", "aligned", "exact", "not_better", "resolved", "recommend", "accepted"),
    [
        (True, True, True, True, True, True, True),
        (False, True, True, True, True, True, False),
        (True, False, True, True, True, True, False),
        (True, True, False, True, True, True, False),
        # the CLEAR code's further conditions (`_allow_online_challenge_override`)
        (True, True, True, False, True, True, False),  # default_not_best
        (True, True, True, True, False, True, False),  # unresolved_conflict
        (True, True, True, True, True, False, False),  # recommend_override
        (True, True, True, None, None, None, False),  # recorded before they were asked: no acceptance
        (True, True, True, True, True, None, False),  # recorded before recommend_override was asked
    ],
)
def test_audit_accepts(
    clear: bool,
    aligned: bool,
    exact: bool,
    not_better: bool | None,
    resolved: bool | None,
    recommend: bool | None,
    accepted: bool,
) -> None:
    assessment = AuditAssessment(
        clearly_supports_challenger=clear,
        aligned_with_question=aligned,
        supports_exact_option=exact,
        default_not_better_supported=not_better,
        no_unresolved_conflict=resolved,
        recommend_override=recommend,
    )
    assert rules.audit_accepts(assessment) is accepted
    assert assessment.needs_reassessment() is (None in (not_better, resolved, recommend))


# The CLEAR code's `allow_second_search_override` (targeted_search.py) grants an override only when, with the
# conditions A.2 names, its adjudicator's `recommend_override` is true as well: the guard's sixth condition.
@pytest.mark.parametrize(("recommend", "granted"), [(True, True), (False, False), (None, False)])
def test_guard_needs_the_code_recommend_override(recommend: bool | None, granted: bool) -> None:
    five = dict.fromkeys(
        (
            "supports_challenger",
            "default_not_better_supported",
            "aligned_with_question",
            "supports_exact_option",
            "no_unresolved_conflict",
        ),
        True,
    )
    assessment = GuardAssessment(**five, recommend_override=recommend)
    assert rules.guard_grants(assessment) is granted
    assert assessment.needs_reassessment() is (recommend is None)


@pytest.mark.parametrize(
    ("route", "answers", "expected"),
    [
        ("keep_parametric", ("A", "B", "C"), "A"),
        ("keep_local", ("A", "B", "C"), "B"),
        ("accept_dynamic", ("A", "B", "C"), "C"),
        ("consensus", ("A", "B", "B"), "B"),
        ("consensus", ("A", "B", "A"), "A"),
        ("consensus", ("A", "B", "C"), None),
        ("keep_local", ("A", None, "C"), None),
        ("needs_more_search", ("A", "A", "A"), None),
    ],
)
def test_answer_for_route_comes_from_candidates(route: str, answers: tuple, expected: str | None) -> None:
    b = bundle(*answers)
    answer = rules.answer_for_route(route, b, letter_agreement(b))  # type: ignore[arg-type]
    assert (answer.display() if answer else None) == expected


@pytest.mark.parametrize(("done", "bound", "allowed"), [(0, 1, True), (1, 1, False), (0, 0, False), (2, 3, True)])
def test_follow_up_rounds_are_bounded(done: int, bound: int, allowed: bool) -> None:
    assert rules.may_follow_up(done, Thresholds(max_followup_rounds=bound)) is allowed


def test_competing_answers_lists_each_distinct_answer_once() -> None:
    competing = rules.competing_answers(bundle("A", "A", "C"))
    assert [(p, a.display()) for p, a in competing] == [("parametric", "A"), ("dynamic", "C")]


def test_unanimity_requires_three_answers() -> None:
    assert rules.is_unanimous(letter_agreement(bundle("A", "A", "A")))
    assert not rules.is_unanimous(letter_agreement(bundle("A", "A", None)))
    assert not rules.is_unanimous(Agreement())
