"""A reasoning model's thinking is kept in the trail: stripped from the answer, stored (capped) on the stage's usage
row, so the report and the JSON record show how the answer was reached."""

from __future__ import annotations

from collections.abc import Callable

from clearmed.backbones.client import ClearmedLM
from clearmed.signatures.records import CallUsage, Decision
from clearmed.signatures.records.usage import THINKING_KEPT
from clearmed.testing import (
    QUESTION,
    ScriptedCall,
    build_toy_program,
    format_chat_reply,
    label_all,
    pathway_replies,
    verifier_reply,
)

THOUGHT = "The vignette fits hypothyroidism: weight gain, cold intolerance."


def thinking_verifier(thought: str) -> Callable[[ScriptedCall], str]:
    def reply(call: ScriptedCall) -> str:
        return f"<think>{thought}</think>\n" + format_chat_reply(verifier_reply("consensus"))

    return reply


def decide(thought: str) -> Decision:
    script = {
        **pathway_replies("A", "A", "A"),
        "source_quality": label_all("high"),
        "verifier": thinking_verifier(thought),
    }
    program, engine, _ = build_toy_program(script)
    # The client every config builds: it splits the thinking off before DSPy parses the answer.
    program.role_lms["main"] = ClearmedLM("local/scripted", engine=engine, cache=False, num_retries=0)
    decision = program(question=QUESTION).decision
    assert Decision.model_validate_json(decision.model_dump_json()) == decision
    return decision


def verifier_row(decision: Decision) -> CallUsage:
    (row,) = [row for row in decision.usage if row.stage == "verifier"]
    return row


def test_the_answer_parses_and_the_thinking_is_on_the_stage_row() -> None:
    decision = decide(THOUGHT)
    assert decision.status == "answered"
    assert decision.route == "consensus"
    row = verifier_row(decision)
    assert row.thinking == THOUGHT
    assert row.thinking_chars == len(THOUGHT)
    assert all(r.thinking == "" and r.thinking_chars == 0 for r in decision.usage if r.stage != "verifier")


def test_long_thinking_is_capped_with_its_full_length() -> None:
    thought = "hmm " * 2000
    row = verifier_row(decide(thought))
    assert row.thinking_chars == len(thought.strip())  # the split trims the block's edges
    assert len(row.thinking) == THINKING_KEPT
    assert thought.startswith(row.thinking)


def test_old_usage_rows_load_without_thinking() -> None:
    row = CallUsage.model_validate({"stage": "verifier", "calls": 1})
    assert (row.thinking, row.thinking_chars, row.passages_dropped, row.fit_tokens) == ("", 0, 0, None)
