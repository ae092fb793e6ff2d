"""The calibrated verifier: log-linear pooling of the pathways' option distributions, read as CLEAR routes."""

from __future__ import annotations

import pytest

from clearmed.programs.adjudication.calibrated import confidence_label, pool, pooled_route

EQUAL = {"parametric": 1.0, "local": 1.0, "dynamic": 1.0}


def test_pooling_is_log_linear_and_normalised() -> None:
    combined = pool({"parametric": {"A": 0.6, "B": 0.4}, "local": {"A": 0.5, "B": 0.5}}, EQUAL)
    assert combined["A"] == pytest.approx(0.6)  # the uniform local pathway changes nothing
    assert sum(combined.values()) == pytest.approx(1.0)
    doubled = pool({"parametric": {"A": 0.6, "B": 0.4}}, {"parametric": 2.0})
    assert doubled["A"] == pytest.approx(0.36 / (0.36 + 0.16))
    assert pool({"parametric": {"A": 0.9, "B": 0.1}}, {"parametric": 0.0})["A"] == pytest.approx(0.5)


def test_a_zero_probability_does_not_veto() -> None:
    combined = pool(
        {"parametric": {"A": 0.0, "B": 1.0}, "local": {"A": 1.0, "B": 0.0}}, {"parametric": 1.0, "local": 2.0}
    )
    assert max(combined, key=combined.__getitem__) == "A"


def test_unanimous_pathways_give_consensus() -> None:
    dist = {"A": 0.7, "B": 0.3}
    result = pooled_route(
        {"parametric": ("A",), "local": ("A",), "dynamic": ("A",)},
        {"parametric": dist, "local": dist, "dynamic": dist},
        EQUAL,
    )
    assert result.route == "consensus"
    assert result.letter == "A"
    assert result.probability > 0.9


def test_a_confident_lone_pathway_gets_its_own_route() -> None:
    answers = {"parametric": ("A",), "local": ("B",), "dynamic": ("C",)}
    dists = {
        "parametric": {"A": 0.4, "B": 0.3, "C": 0.3},
        "local": {"A": 0.3, "B": 0.4, "C": 0.3},
        "dynamic": {"A": 0.05, "B": 0.05, "C": 0.9},
    }
    assert pooled_route(answers, dists, EQUAL).route == "accept_dynamic"
    dists["local"] = {"A": 0.01, "B": 0.98, "C": 0.01}
    dists["dynamic"] = {"A": 0.3, "B": 0.3, "C": 0.4}
    assert pooled_route(answers, dists, EQUAL).route == "keep_local"
    # The weights decide between pathways: a silenced local pathway hands it back to parametric.
    assert pooled_route(answers, dists, {"parametric": 3.0, "local": 0.0, "dynamic": 1.0}).route == "keep_parametric"


def test_two_pathways_sharing_the_pooled_answer_are_a_consensus() -> None:
    answers = {"parametric": ("A",), "local": ("A",), "dynamic": ("B",)}
    dists = {"parametric": {"A": 0.6, "B": 0.4}, "local": {"A": 0.7, "B": 0.3}, "dynamic": {"A": 0.45, "B": 0.55}}
    assert pooled_route(answers, dists, EQUAL).route == "consensus"


def test_a_pool_that_chose_no_pathways_answer_falls_to_the_best_rated_answer() -> None:
    answers = {"parametric": ("A",), "local": ("B",)}
    dists = {"parametric": {"A": 0.4, "B": 0.25, "C": 0.35}, "local": {"A": 0.3, "B": 0.35, "C": 0.35}}
    result = pooled_route(answers, dists, EQUAL)
    assert result.route == "keep_parametric"
    assert result.letter == "A"


def test_nothing_answered() -> None:
    assert pooled_route({"parametric": None}, {}, EQUAL).route == "needs_more_search"


@pytest.mark.parametrize(("p", "label"), [(0.95, "high"), (0.8, "high"), (0.6, "medium"), (0.49, "low")])
def test_confidence_label(p: float, label: str) -> None:
    assert confidence_label(p) == label


# ------------------------------------------------------------------------------- falling back, said aloud


def _generating_script(answer: str = "A") -> dict:
    from clearmed.testing import GUARD_ALL_TRUE, label_all, pathway_replies

    return {
        **pathway_replies(answer, answer, answer), "source_quality": label_all("high"), "guard": GUARD_ALL_TRUE,
        "followup_query": {"query": "thyroid"},
        "audit": {"rationale": "r", "clearly_supports_challenger": False, "aligned_with_question": True,
                  "supports_exact_option": True},
    }  # fmt: skip


def test_calibrated_mode_warns_once_per_run_and_records_why_it_fell_back() -> None:
    import warnings

    from clearmed.programs.adjudication.calibrated import CalibratedFallbackWarning
    from clearmed.signatures.records.settings import ProgramSettings
    from clearmed.testing import QUESTION, build_toy_program

    # A backbone without log-probabilities: every pathway generates, so nothing enters the pool.
    settings = ProgramSettings(json_fallback=False, parallel_pathways="off", verifier_mode="calibrated")
    program, _, _ = build_toy_program(_generating_script(), settings=settings)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        decisions = [program(question=QUESTION.model_copy(update={"id": f"q{i}"})).decision for i in range(3)]
    fallback_warnings = [w for w in caught if issubclass(w.category, CalibratedFallbackWarning)]
    assert len(fallback_warnings) == 1  # once per run, not once per question
    assert "heuristic" in str(fallback_warnings[0].message)
    for decision in decisions:
        step = next(step for step in decision.steps if step.verifier is not None)
        assert step.rule.startswith("heuristic_")  # the step says which rule decided
        assert step.verifier.mode == "heuristic"
        assert step.verifier.calibrated_fallback == "nothing_to_pool"  # and the record says why


def test_multi_answer_questions_always_fall_back_and_say_so() -> None:
    import warnings

    from clearmed.programs.adjudication.calibrated import CalibratedFallbackWarning
    from clearmed.signatures.records.settings import ProgramSettings
    from clearmed.testing import QUESTION, SCORED_CALIBRATED, build_toy_program

    multi = QUESTION.model_copy(update={"answer_mode": "multi", "gold_letters": ["A", "B"]})
    program, _, _ = build_toy_program(
        _generating_script("A, B"),
        question=multi,
        settings=SCORED_CALIBRATED.model_copy(update={"mcq_decoding": "generate"}),
    )
    with pytest.warns(CalibratedFallbackWarning):
        decision = program(question=multi).decision
    output = decision.verifier_outputs[0]
    assert (output.mode, output.calibrated_fallback) == ("heuristic", "several_answers")
    # Heuristic mode is no fallback: nothing is marked, nothing is warned.
    heuristic = ProgramSettings(json_fallback=False, parallel_pathways="off", verifier_mode="heuristic")
    other, _, _ = build_toy_program(_generating_script(), settings=heuristic)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibratedFallbackWarning)
        plain = other(question=QUESTION).decision
    assert plain.verifier_outputs[0].calibrated_fallback is None


def test_a_decided_question_is_no_fallback() -> None:
    from clearmed.programs.adjudication.calibrated import calibrated_fallback
    from clearmed.signatures.records import Answer, Candidate, EvidenceBundle, OptionScores, Question, Thresholds

    question = Question(id="q", text="Which?", options={"A": "a", "B": "b"})
    scored = Candidate(
        pathway="parametric",
        answer=Answer(letters=("A",)),
        option_scores=OptionScores(probs={"A": 0.7, "B": 0.3}, letters=("A",)),
    )
    assert calibrated_fallback(EvidenceBundle(question=question, candidates=[scored]), Thresholds()) is None
    free = Question(id="f", text="What causes it?", answer_mode="free_text")
    generated = Candidate(pathway="parametric", answer=Answer(text="iodine deficiency"))
    assert calibrated_fallback(EvidenceBundle(question=free, candidates=[generated]), Thresholds()) == "free_text"


def test_a_pool_whose_weights_sum_to_zero_falls_back_never_to_a_letter_position() -> None:
    from clearmed.programs.adjudication.calibrated import calibrated_fallback, calibrated_verify
    from clearmed.programs.assessors.agreement import letter_agreement
    from clearmed.signatures.records import Answer, Candidate, EvidenceBundle, OptionScores, Question, Thresholds

    # The shipped weights: only the parametric pathway counts. Its scoring pass failed (it generated C), so the
    # local and dynamic distributions, both for B, are all that is left to pool, at weight 0.
    shipped = Thresholds(
        calibrated_parametric_weight=0.865,
        calibrated_local_weight=0.0,
        calibrated_dynamic_weight=0.0,
        calibrated_high_weight=0.0,
    )
    question = Question(id="q", text="Which?", options={"A": "a", "B": "b", "C": "c", "D": "d"})
    for_b = OptionScores(probs={"A": 0.05, "B": 0.85, "C": 0.05, "D": 0.05}, letters=("B",))
    candidates = [
        Candidate(pathway="parametric", answer=Answer(letters=("C",))),
        Candidate(pathway="local", answer=Answer(letters=("B",)), option_scores=for_b),
        Candidate(pathway="dynamic", answer=Answer(letters=("B",)), option_scores=for_b),
    ]
    bundle = EvidenceBundle(question=question, candidates=candidates)
    assert calibrated_fallback(bundle, shipped) == "nothing_to_pool"
    # Before: a uniform pool, whose first maximum is letter A, read as the verifier's answer.
    assert calibrated_verify(bundle, letter_agreement(bundle), shipped) is None
    assert calibrated_fallback(bundle, Thresholds()) is None  # with weight on them, they pool


def test_the_program_records_a_zero_weight_pool_as_nothing_to_pool() -> None:
    from clearmed.programs.adjudication.calibrated import CalibratedFallbackWarning
    from clearmed.signatures.records import Thresholds
    from clearmed.testing import QUESTION, SCORED_CALIBRATED, build_toy_program, label_all, pathway_replies

    shipped = Thresholds(calibrated_parametric_weight=0.865, calibrated_local_weight=0.0, calibrated_dynamic_weight=0.0)
    # The parametric pathway has no distribution: its scoring pass fails and it generates its letter (C).
    scores = {stage: {"A": 0.05, "B": 0.85, "C": 0.05, "D": 0.05} for stage in ("local_answer", "dynamic_answer")}
    program, _, _ = build_toy_program(
        {**pathway_replies("C", "B", "B"), "source_quality": label_all("high")},
        settings=SCORED_CALIBRATED,
        scores=scores,
        thresholds=shipped,
    )
    with pytest.warns(CalibratedFallbackWarning):
        decision = program(question=QUESTION).decision
    (output,) = decision.verifier_outputs
    assert (output.mode, output.calibrated_fallback) == ("heuristic", "nothing_to_pool")
    assert decision.letters == ("B",)  # local and dynamic agree; before: the pool's first letter decided
