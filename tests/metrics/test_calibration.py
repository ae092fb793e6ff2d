"""Calibration of pathway confidences: ECE, reliability bins, the letter prior, and the chance oracle."""

from __future__ import annotations

import pytest

from clearmed.metrics import calibration, letter_prior


def test_perfectly_calibrated_confidences_have_zero_ece() -> None:
    confidences = [0.25] * 4 + [0.75] * 4
    correct = [True, False, False, False, True, True, True, False]
    result = calibration(confidences, correct)
    assert result is not None
    assert result.ece == pytest.approx(0.0)
    assert [b.count for b in result.bins] == [4, 4]


def test_overconfidence_shows_as_ece() -> None:
    result = calibration([0.95] * 10, [True] * 5 + [False] * 5)
    assert result is not None
    assert result.ece == pytest.approx(0.45)
    assert result.mean_confidence == pytest.approx(0.95)
    assert result.accuracy == pytest.approx(0.5)


def test_a_confidence_of_one_lands_in_the_last_bin() -> None:
    result = calibration([1.0, 0.0], [True, False])
    assert result is not None
    assert [(b.low, b.count) for b in result.bins] == [(0.0, 1), (0.9, 1)]


def test_no_data_and_mismatched_lengths() -> None:
    assert calibration([], []) is None
    with pytest.raises(ValueError, match="one correctness flag"):
        calibration([0.5], [])


def test_letter_prior_shows_positional_bias() -> None:
    prior = letter_prior([{"A": 0.1, "B": 0.7, "C": 0.2}, {"A": 0.3, "B": 0.4, "C": 0.3}])
    assert prior["B"] == {"mean_probability": 0.55, "top_share": 1.0}
    assert prior["A"]["top_share"] == 0.0


def test_pathway_worth_reports_the_chance_oracle_and_calibration() -> None:
    from clearmed.evaluation.pathway_worth import pathway_worth
    from clearmed.signatures.records.settings import ProgramSettings
    from clearmed.testing import QUESTION, build_toy_program, label_all, verifier_reply

    scores = {
        "parametric": {"A": 0.9, "B": 0.05, "C": 0.03, "D": 0.02},
        "local_answer": {"A": 0.1, "B": 0.8, "C": 0.05, "D": 0.05},
        "dynamic_answer": {"A": 0.4, "B": 0.3, "C": 0.2, "D": 0.1},
    }
    settings = ProgramSettings(json_fallback=False, parallel_pathways="off", mcq_decoding="score")
    script = {"source_quality": label_all("high"), "verifier": verifier_reply("keep_parametric"),
              "audit": {"rationale": "r", "clearly_supports_challenger": False, "aligned_with_question": True,
                        "supports_exact_option": True}, "followup_query": {"query": "q"}}  # fmt: skip
    program, _, _ = build_toy_program(script, settings=settings, scores=scores)
    worth = pathway_worth([program(question=QUESTION).decision])
    assert worth is not None
    assert worth.pathway_accuracy == {"parametric": 1.0, "local": 0.0, "dynamic": 1.0}
    assert worth.chance_oracle == pytest.approx(1.0)
    assert worth.calibration["parametric"].mean_confidence == pytest.approx(0.9)
    assert worth.letter_prior["local"]["B"]["top_share"] == 1.0
