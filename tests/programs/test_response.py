"""The free-text response (CLEAR 2.4): written from the whole conversation, as the pathways read it."""

from __future__ import annotations

from pathlib import Path

from clearmed.benchmarks import load_benchmark
from clearmed.programs.baselines import SinglePathway
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import build_toy_program, label_all, scripted_lm, verifier_reply

HEALTHBENCH = Path(__file__).parents[1] / "benchmarks" / "fixtures" / "healthbench" / "hard.jsonl"
SETTINGS = ProgramSettings(json_fallback=False, parallel_pathways="off")
FREE_TEXT_REPLIES = {
    "parametric": {"rationale": "r", "answer": "see a clinician"},
    "local_answer": {"rationale": "r", "cited_ids": ["L1"], "answer": "see a clinician"},
    "dynamic_answer": {"rationale": "r", "cited_ids": ["W1"], "answer": "see a clinician"},
    "source_quality": label_all("high"),
    "verifier": verifier_reply("keep_parametric", answer="see a clinician"),
    "response": {"response": "Please see a clinician about it."},
}


def multi_turn():
    question = load_benchmark("healthbench-hard", source=HEALTHBENCH).questions[1]
    assert [turn.role for turn in question.conversation or []] == ["system", "user", "assistant", "user"]
    return question


def test_the_response_prompt_carries_the_earlier_turns() -> None:
    question = multi_turn()
    program, engine, _ = build_toy_program(FREE_TEXT_REPLIES, question=question, settings=SETTINGS)
    decision = program(question=question).decision
    assert decision.response == "Please see a clinician about it."
    prompt = next(call.user for call in engine.calls if call.stage == "response")
    for earlier in ("system: FAKE system", "user: first", "assistant: reply"):
        assert earlier in prompt
    assert "FAKE follow-up question" in prompt
    # Exactly as the pathways saw it.
    parametric = next(call.user for call in engine.calls if call.stage == "parametric")
    assert "Conversation so far:" in parametric
    assert "Conversation so far:" in prompt


def test_a_single_pathway_response_sees_the_conversation_too() -> None:
    question = multi_turn()
    lm, engine = scripted_lm(FREE_TEXT_REPLIES)
    program = SinglePathway("direct", settings=SETTINGS, role_lms={"main": lm})
    assert program(question=question).decision.response == "Please see a clinician about it."
    prompt = next(call.user for call in engine.calls if call.stage == "response")
    assert "assistant: reply" in prompt
