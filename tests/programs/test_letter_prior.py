"""Letter-prior correction of scored option distributions: the arithmetic, which candidates it touches, the live
program's trail, replay from the uncorrected record, and fitting the priors (toy world, scripted engine)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from clearmed.evaluation.pathway_worth import pathway_worth
from clearmed.optimize.replay import ReplayMiss, replay_decision
from clearmed.programs import fit_letter_priors
from clearmed.programs._letter_prior import corrected_bundle, corrected_candidate, corrected_scores
from clearmed.programs.adjudication import before_followups
from clearmed.signatures.records import (
    Answer,
    Candidate,
    Decision,
    EvidenceBundle,
    OptionScores,
    Question,
    Thresholds,
)
from clearmed.testing import QUESTION, SCORED_CALIBRATED, build_toy_program, label_all

SCORES = {
    "parametric": {"A": 0.5, "B": 0.2, "C": 0.2, "D": 0.1},
    "local_answer": {"A": 0.7, "B": 0.2, "C": 0.05, "D": 0.05},
    "dynamic_answer": {"A": 0.3, "B": 0.4, "C": 0.2, "D": 0.1},
}
# A local pathway that puts most of its mass on A whatever the question: its 0.7 on A is no evidence, and its
# 0.2 on B is four times what it usually gives B.
LOCAL_PRIOR = {"A": 0.85, "B": 0.05, "C": 0.05, "D": 0.05}
CORRECTING = Thresholds(letter_priors={"local": LOCAL_PRIOR}, letter_prior_strength=1.0)


def scores(probs: dict[str, float], *, per_option: bool = False) -> OptionScores:
    return OptionScores(probs=probs, letters=(max(probs, key=probs.__getitem__),), per_option=per_option)


def scored(pathway: str, probs: dict[str, float]) -> Candidate:
    result = scores(probs)
    return Candidate(pathway=pathway, answer=Answer(letters=result.letters), option_scores=result)  # type: ignore[arg-type]


def run(thresholds: Thresholds) -> Decision:
    program, _, _ = build_toy_program(
        {"source_quality": label_all("medium")}, settings=SCORED_CALIBRATED, thresholds=thresholds, scores=SCORES
    )
    decision = program(question=QUESTION).decision
    return Decision.model_validate_json(decision.model_dump_json())  # as read back from a run folder


def test_the_prior_is_divided_out_at_the_given_strength() -> None:
    probs = {"A": 0.6, "B": 0.3, "C": 0.1}
    prior = {"A": 0.5, "B": 0.25, "C": 0.25}
    full = corrected_scores(scores(probs), prior, 1.0)
    # 0.6/0.5 : 0.3/0.25 : 0.1/0.25 = 1.2 : 1.2 : 0.4
    assert full.probs == pytest.approx({"A": 0.4286, "B": 0.4286, "C": 0.1429}, abs=1e-3)
    half = corrected_scores(scores(probs), prior, 0.5)
    assert half.probs["A"] > half.probs["B"]
    assert corrected_scores(scores(probs), prior, 0.0).probs == pytest.approx(probs)
    flipped = corrected_scores(scores({"A": 0.5, "B": 0.4, "C": 0.1}), prior, 1.0)
    assert flipped.letters == ("B",)  # the answer is the corrected argmax


def test_a_prior_over_more_letters_is_restricted_to_the_questions_options() -> None:
    prior = {"A": 0.4, "B": 0.2, "C": 0.2, "D": 0.1, "E": 0.1}
    three = corrected_scores(scores({"A": 0.5, "B": 0.25, "C": 0.25}), prior, 1.0)
    assert three.probs == pytest.approx({"A": 1 / 3, "B": 1 / 3, "C": 1 / 3})
    # a letter the prior never saw counts as an average letter
    unseen = corrected_scores(scores({"A": 0.5, "F": 0.5}), {"A": 0.5, "B": 0.5}, 1.0)
    assert unseen.probs == pytest.approx({"A": 0.5, "F": 0.5})


@pytest.mark.parametrize(
    "candidate",
    [
        Candidate(pathway="local", answer=Answer(letters=("A",))),  # generated: nothing to correct
        Candidate(pathway="local", answer=None, option_scores=scores({"A": 0.7, "B": 0.3})),  # failed
        Candidate(
            pathway="local",
            answer=Answer(letters=("A",)),
            option_scores=scores({"A": 0.7, "B": 0.3}, per_option=True),  # several answers allowed
        ),
        scored("parametric", {"A": 0.7, "B": 0.3}),  # no prior fitted for this pathway
    ],
)
def test_only_scored_single_answer_candidates_with_a_prior_are_corrected(candidate: Candidate) -> None:
    assert corrected_candidate(candidate, CORRECTING) is candidate


def test_strength_zero_leaves_the_bundle_alone() -> None:
    bundle = EvidenceBundle(
        question=QUESTION, candidates=[scored(p, {"A": 0.7, "B": 0.3}) for p in ("parametric", "local", "dynamic")]
    )
    assert corrected_bundle(bundle, CORRECTING.model_copy(update={"letter_prior_strength": 0.0})) is bundle
    assert corrected_bundle(bundle, CORRECTING) is not bundle


def test_the_live_program_reads_the_corrected_answers_and_the_trail_says_so() -> None:
    plain = run(Thresholds())
    assert plain.bundle.candidate("local").answer.letters == ("A",)
    decision = run(CORRECTING)
    local = decision.bundle.candidate("local")
    assert local.answer.letters == ("B",)
    assert local.option_scores.probs["B"] > local.option_scores.probs["A"]
    assert local.uncorrected is not None
    assert local.uncorrected.answer.letters == ("A",)
    assert local.uncorrected.option_scores.probs == SCORES["local_answer"]
    assert decision.bundle.candidate("parametric").uncorrected is None  # no prior for it
    # the agreement every rule used is that of the corrected answers
    assert decision.agreement.parametric_local is False
    assert decision.agreement.local_dynamic is True
    step = next(s for s in decision.steps if s.mechanism == "calibration")
    assert step.rule == "letter_prior_corrected"
    assert "local A -> B" in step.outcome
    # B, held by local and dynamic after the correction, is the consensus the pool reads
    assert (decision.route, decision.letters) == ("consensus", ("B",))
    assert (plain.route, plain.letters) != (decision.route, decision.letters)


def test_replay_starts_from_the_scored_candidates_and_reproduces_the_run() -> None:
    decision = run(CORRECTING)
    bundle, agreement = before_followups(decision.bundle, decision.agreement)
    assert all(c.uncorrected is None for c in bundle.candidates)
    assert bundle.candidate("local").answer.letters == ("A",)
    assert agreement.parametric_local is True
    same, actions = replay_decision(decision, decision.thresholds)
    assert (same.answer, same.route, same.rule) == (decision.answer, decision.route, decision.deciding_rule)
    assert same.bundle.candidates == decision.bundle.candidates
    assert actions.misses == []
    # Replayed without the correction, parametric and local agree on A against the web's B: the challenge audit
    # the corrected run never needed is a miss.
    with pytest.raises(ReplayMiss, match="audit"):
        replay_decision(decision, Thresholds())


def test_a_run_recorded_without_the_correction_replays_with_it() -> None:
    plain = run(Thresholds())
    assert any(step.mechanism == "audit" for step in plain.steps)
    corrected, actions = replay_decision(plain, CORRECTING)
    live = run(CORRECTING)
    assert (corrected.answer, corrected.route, corrected.rule) == (live.answer, live.route, live.deciding_rule)
    assert corrected.bundle.candidates == live.bundle.candidates
    assert actions.misses == []


def test_pathway_accuracy_counts_each_pathway_as_it_scored() -> None:
    decision = run(CORRECTING)  # gold is A: the local pathway scored A, the correction made it B
    worth = pathway_worth([decision])
    assert worth is not None
    assert worth.pathway_accuracy["local"] == 1.0
    assert decision.letters == ("B",)  # the program's answer is the corrected consensus


def test_a_rescored_dynamic_candidate_is_corrected_like_the_others() -> None:
    thresholds = Thresholds(
        letter_priors={"dynamic": {"A": 0.1, "B": 0.7, "C": 0.1, "D": 0.1}},
        letter_prior_strength=1.0,
        calibrated_more_search_below=0.99,
    )
    program, _, _ = build_toy_program(
        {"source_quality": label_all("medium"), "followup_query": {"query": "hypothyroidism TSH"}},
        settings=SCORED_CALIBRATED,
        thresholds=thresholds,
        scores={**SCORES, "dynamic_followup": {"A": 0.2, "B": 0.6, "C": 0.1, "D": 0.1}},
    )
    decision = Decision.model_validate_json(program(question=QUESTION).decision.model_dump_json())
    round_ = decision.bundle.followups[0]
    assert round_.rescored is not None
    assert round_.rescored.letters == ("B",)
    dynamic = decision.bundle.candidate("dynamic")
    assert dynamic.answer.letters == ("A",)  # 0.2/0.1 beats 0.6/0.7
    assert dynamic.uncorrected is not None
    assert dynamic.uncorrected.option_scores == round_.rescored
    bundle, _ = before_followups(decision.bundle, decision.agreement)
    assert bundle.candidate("dynamic").option_scores.probs == SCORES["dynamic_answer"]
    assert bundle.candidate("dynamic").uncorrected is None
    same, _ = replay_decision(decision, decision.thresholds)
    assert same.bundle.candidate("dynamic") == dynamic


def test_priors_are_the_mean_scored_distribution_of_each_pathway() -> None:
    def bundle(local: dict[str, float], question: Question = QUESTION) -> EvidenceBundle:
        return EvidenceBundle(question=question, candidates=[scored("local", local), Candidate(pathway="parametric")])

    bundles = [bundle({"A": 0.8, "B": 0.2}), bundle({"A": 0.4, "B": 0.6})]
    assert fit_letter_priors(bundles, min_questions=2) == {"local": {"A": 0.6, "B": 0.4}}
    assert fit_letter_priors(bundles, min_questions=3) == {}  # too few questions to tell a prior from answers
    # what the pathway scored counts, not a correction a recorded run applied
    corrected = corrected_bundle(
        bundles[0], Thresholds(letter_priors={"local": {"A": 0.9, "B": 0.1}}, letter_prior_strength=1)
    )
    assert fit_letter_priors([corrected, bundles[1]], min_questions=2) == {"local": {"A": 0.6, "B": 0.4}}
    multi = QUESTION.model_copy(update={"answer_mode": "multi"})
    assert fit_letter_priors([bundle({"A": 0.8, "B": 0.2}, multi)], min_questions=1) == {}


def test_priors_must_be_positive_probabilities() -> None:
    with pytest.raises(ValidationError, match=r"letter_priors\.local\.B must be a positive probability"):
        Thresholds(letter_priors={"local": {"A": 1.0, "B": 0.0}})
    with pytest.raises(ValidationError):
        Thresholds(letter_prior_strength=-1.0)
