"""Stated confidence (`[program] stated_confidence`): generated MCQ answers also state how likely they are right,
and the calibrated verifier pools that number, shrunk towards chance (scripted engine; no model)."""

from __future__ import annotations

import pytest

from clearmed.optimize.replay import replay_decision
from clearmed.programs import ProgramSettings
from clearmed.programs._answers import parse_stated_confidence
from clearmed.programs._calibrated import generated_probability
from clearmed.signatures.records import Answer, Candidate, Decision, Thresholds
from clearmed.testing import GUARD_ALL_TRUE, QUESTION, build_toy_program, label_all, pathway_replies

# No scores are scripted, so every pathway generates: a hosted backbone without log-probabilities.
STATED = ProgramSettings(
    json_fallback=False, parallel_pathways="off", verifier_mode="calibrated", stated_confidence=True
)


def script(parametric: str = "0.95", local: str = "40%", dynamic: str = "0.3") -> dict:
    replies = pathway_replies("A", "B", "B")
    for stage, stated in (("parametric", parametric), ("local_answer", local), ("dynamic_answer", dynamic)):
        replies[stage] = {**replies[stage], "confidence": stated}  # type: ignore[dict-item]
    return {**replies, "source_quality": label_all("high"), "guard": GUARD_ALL_TRUE,
            "followup_query": {"query": "thyroid"}}  # fmt: skip


def run(settings: ProgramSettings = STATED, thresholds: Thresholds | None = None, **stated: str) -> tuple:
    program, engine, _ = build_toy_program(script(**stated), settings=settings, thresholds=thresholds)
    decision = program(question=QUESTION).decision
    return Decision.model_validate_json(decision.model_dump_json()), engine


@pytest.mark.parametrize(
    ("raw", "value"),
    [("0.7", 0.7), (".7", 0.7), ("70%", 0.7), ("70", 0.7), (" 1 ", 1.0), ("0", 0.0), ("100%", 1.0)],
)
def test_a_stated_number_or_percentage_is_read_as_a_probability(raw: str, value: float) -> None:
    assert parse_stated_confidence(raw) == pytest.approx(value)


@pytest.mark.parametrize("raw", ["high", "very sure", "0.6-0.8", "150", "1.5", "-0.2", "", None, "70 %%"])
def test_anything_else_is_not_guessed_at(raw: str | None) -> None:
    assert parse_stated_confidence(raw) is None


def test_the_generated_prompts_ask_for_it_and_the_candidates_record_it() -> None:
    decision, engine = run()
    for call in engine.calls:
        if call.stage in ("parametric", "local_answer", "dynamic_answer"):
            assert "`confidence`" in call.system
    parametric = decision.bundle.candidate("parametric")
    assert (parametric.stated_confidence_raw, parametric.stated_confidence) == ("0.95", 0.95)
    assert decision.bundle.candidate("local").stated_confidence == pytest.approx(0.4)
    # off (the default), the prompt is the signature's own and nothing is recorded
    plain, plain_engine = run(ProgramSettings(json_fallback=False, parallel_pathways="off"))
    assert all("`confidence`" not in c.system for c in plain_engine.calls if c.stage == "parametric")
    assert plain.bundle.candidate("parametric").stated_confidence_raw is None


def test_an_unreadable_confidence_keeps_the_answer_and_its_raw_text() -> None:
    decision, _ = run(parametric="fairly sure")
    parametric = decision.bundle.candidate("parametric")
    assert parametric.answer == Answer(letters=("A",))
    assert parametric.error is None
    assert (parametric.stated_confidence_raw, parametric.stated_confidence) == ("fairly sure", None)


def test_the_calibrated_verifier_pools_the_stated_confidences() -> None:
    # A sure parametric A against two unsure Bs: taken at their word, the pool follows the parametric pathway.
    decision, engine = run()
    verifier = decision.verifier_outputs[0]
    assert verifier.mode == "calibrated"
    assert max(verifier.pooled, key=verifier.pooled.__getitem__) == "A"
    assert decision.route == "keep_parametric"
    assert "verifier" not in engine.stages()
    # Trusting the stated numbers less (replayed, no LM call), the pool is less sure of the same answer.
    calls = len(engine.calls)
    shrunk, _ = replay_decision(decision, Thresholds(calibrated_stated_weight=0.2))
    assert 0.25 < shrunk.verifier_outputs[0].pooled["A"] < verifier.pooled["A"]
    assert len(engine.calls) == calls
    # Not trusted at all, a stated confidence says nothing: every generated letter is an even distribution.
    ignored, _ = replay_decision(decision, Thresholds(calibrated_stated_weight=0.0))
    assert ignored.verifier_outputs[0].pooled == pytest.approx(dict.fromkeys("ABCD", 0.25))


def test_a_stated_confidence_is_shrunk_towards_chance_and_never_a_veto() -> None:
    def candidate(stated: float | None) -> Candidate:
        return Candidate(pathway="parametric", answer=Answer(letters=("A",)), stated_confidence=stated)

    assert generated_probability(candidate(0.85), 4, Thresholds()) == pytest.approx(0.85)
    assert generated_probability(candidate(0.85), 4, Thresholds(calibrated_stated_weight=0.5)) == pytest.approx(0.55)
    assert generated_probability(candidate(1.0), 4, Thresholds()) == pytest.approx(0.99)
    assert generated_probability(candidate(0.1), 4, Thresholds()) == pytest.approx(0.25)  # below chance: no signal
    # with none stated, the fixed probability for a generated letter (0: left out)
    assert generated_probability(candidate(None), 4, Thresholds()) == 0.0
    assert generated_probability(candidate(None), 4, Thresholds(calibrated_generated_probability=0.6)) == 0.6
