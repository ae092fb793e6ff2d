"""Prompts fit the backbone: passages are left out before a call that would exceed the LM's context window, the
trail says so, and an overflow that still happens is recorded (deterministic) instead of passing as an answer."""

from __future__ import annotations

import dspy
import pytest

from clearmed.evaluation.degraded import degraded_stages
from clearmed.programs.lm.prompting import fit_prompt, format_passages, passage_blocks, prompt_limit
from clearmed.programs.lm.stage import context_window
from clearmed.signatures.records import CallUsage, Decision
from clearmed.testing import LOCAL, QUESTION, WEB, build_toy_program, label_all, pathway_replies, verifier_reply

SCRIPT = {
    **pathway_replies("A", "A", "A"),
    "source_quality": label_all("high"),
    "verifier": verifier_reply("consensus"),
}
LEFT_OUT = "left out to fit the model's context window"


def run(window: int | None) -> tuple[Decision, list[str]]:
    program, engine, _ = build_toy_program(SCRIPT)
    lm = program.role_lms["main"]
    lm.kwargs["max_tokens"] = 100  # the output budget the window must also hold
    if window is not None:
        lm.context_window = window  # what ClearmedLM resolves from the config or the server
    decision = program(question=QUESTION).decision
    assert Decision.model_validate_json(decision.model_dump_json()) == decision
    return decision, [call.user for call in engine.calls if call.stage == "verifier"]


def rows(decision: Decision, stage: str) -> list[CallUsage]:
    return [row for row in decision.usage if row.stage == stage]


def test_the_verifier_prompt_is_trimmed_to_the_window_and_the_trail_says_so() -> None:
    # The toy verifier prompt is about 1,230 estimated tokens, every other stage's under 800.
    decision, verifier_prompts = run(1300)
    limit = prompt_limit(1300, 100)
    (row,) = rows(decision, "verifier")
    assert row.passages_dropped >= 2
    assert row.fit_tokens == limit
    assert len(row.passages_dropped_ids) == row.passages_dropped
    dropped = ", ".join(row.passages_dropped_ids)
    assert row.note == f"{row.passages_dropped} passages dropped to fit {limit:,} prompt tokens ({dropped})"
    assert all(r.passages_dropped == 0 and r.note == "" for r in decision.usage if r.stage != "verifier")
    (prompt,) = verifier_prompts
    assert LEFT_OUT in prompt
    assert len(passage_blocks(prompt)) == len(LOCAL) + len(WEB) - row.passages_dropped
    assert decision.status == "answered"
    assert not degraded_stages(decision)


def test_nothing_is_trimmed_when_the_prompt_fits_or_no_window_is_known() -> None:
    for window in (100_000, None):
        decision, (prompt,) = run(window)
        assert all(r.passages_dropped == 0 and r.fit_tokens is None and r.note == "" for r in decision.usage)
        assert LEFT_OUT not in prompt
        assert len(passage_blocks(prompt)) == len(LOCAL) + len(WEB)


def test_passages_go_last_first_from_the_fuller_field() -> None:
    predictor = dspy.Predict("local_evidence, dynamic_evidence -> answer")
    local, web = format_passages(LOCAL, None), format_passages(WEB, None)
    fit = fit_prompt(
        predictor, dspy.ChatAdapter(), {"local_evidence": local, "dynamic_evidence": web}, window=420, output_budget=0
    )
    assert fit.dropped >= 1
    assert fit.limit == prompt_limit(420, 0)
    kept_local = [m.group(0).split("]")[0] for m in passage_blocks(str(fit.inputs["local_evidence"]))]
    assert kept_local == [f"[{p.id}" for p in LOCAL][: len(kept_local)]  # a prefix: the last ranked went first
    dropped_note = [str(v) for v in fit.inputs.values() if LEFT_OUT in str(v)]
    assert dropped_note
    assert all(v.count(LEFT_OUT) == 1 for v in dropped_note)


def test_a_prompt_that_cannot_be_trimmed_enough_is_sent_as_it_is() -> None:
    predictor = dspy.Predict("question -> answer")
    fit = fit_prompt(predictor, dspy.ChatAdapter(), {"question": "word " * 2000}, window=600, output_budget=100)
    assert fit.dropped == 0
    assert fit.inputs == {"question": "word " * 2000}


def test_an_overflow_that_still_happens_is_recorded_as_deterministic() -> None:
    # Issue 31 item 2: after the fit (and a refit when the error names a window: tests/programs/test_stage_refit.py)
    # an overflow would happen again on resume, so it is recorded, not degraded.
    script = {**SCRIPT, "verifier": dspy.ContextWindowExceededError(model="local/scripted", message="too long")}
    program, _, _ = build_toy_program(script)
    decision = program(question=QUESTION).decision
    assert degraded_stages(decision) == []
    (row,) = rows(decision, "verifier")
    assert row.failed


@pytest.mark.parametrize("value", [None, True, "8192"])
def test_only_an_integer_window_counts(value: object) -> None:
    class LM:
        context_window = value

    assert context_window(LM()) is None


def test_a_thinking_backbone_keeps_room_for_its_floor_of_output_tokens() -> None:
    program, _, _ = build_toy_program(SCRIPT)
    lm = program.role_lms["main"]
    lm.kwargs["max_tokens"] = 100
    lm.min_output_tokens = 11_000  # ClearmedLM raises every call's max_tokens to this
    lm.context_window = 12_500
    decision = program(question=QUESTION).decision
    (row,) = rows(decision, "verifier")
    assert row.fit_tokens == prompt_limit(12_500, 11_000)
    assert row.passages_dropped >= 1
