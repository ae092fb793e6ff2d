"""Task adapters (CLEAR 2.4): the MCQ format gate and the free-text response generator.

The format gate never alters a conclusion: it turns an answer that is already valid into letters, asks the
LM to map an answer that names an option in other words, and otherwise reports the answer as unparsed.
"""

from __future__ import annotations

import dspy

from clearmed.programs.lm.context import current
from clearmed.programs.lm.parsing import answer_format, format_options, parse_answer, parse_letters
from clearmed.programs.lm.prompting import format_passages, render_question
from clearmed.programs.lm.stage import run_stage
from clearmed.signatures.clear import ComposeResponse, MapToOptions
from clearmed.signatures.records import Answer, EvidenceBundle, Question, StepError
from clearmed.signatures.records.results import GateResult, ResponseResult


class FormatGate(dspy.Module):
    """Parse an answer in Python; for MCQ text that names no letter, one LM call maps it onto the options."""

    def __init__(self) -> None:
        super().__init__()
        self.map = dspy.Predict(MapToOptions)

    def forward(self, question: Question, raw_answer: str | None) -> GateResult:
        parsed = parse_answer(raw_answer, question)
        if parsed is not None or not question.is_mcq or not raw_answer or not raw_answer.strip():
            return GateResult(answer=parsed)
        if not current().settings.format_gate_lm:
            return GateResult(answer=None)
        result = run_stage(
            "format_gate",
            self.map,
            question=question.text,
            options=format_options(question),
            answer_format=answer_format(question),
            proposed_answer=raw_answer,
        )
        if result.prediction is None:
            return GateResult(answer=None, error=result.error)
        letters = parse_letters(result.prediction.letters, question.options or {}, question.answer_mode)
        return GateResult(answer=Answer(letters=letters) if letters else None)


def resolve_answer(
    gate: FormatGate, question: Question, raw_answer: str | None, stage: str
) -> tuple[Answer | None, StepError | None]:
    """An answer for a candidate: parsed, gate-mapped, or None with an `invalid_answer` error recorded."""
    gated: GateResult = gate(question=question, raw_answer=raw_answer)
    if gated.answer is not None:
        return gated.answer, None
    if gated.error is not None:
        return None, gated.error
    shown = (raw_answer or "").strip()[:200]
    return None, StepError(
        stage=stage,
        kind="invalid_answer",
        message=f"the answer names no valid option for a {question.answer_mode} question: {shown!r}",
        raw_output=raw_answer,
    )


class ResponseGenerator(dspy.Module):
    """Free-text tasks: express the adjudicated conclusion with its evidence; no retrieval, no revision."""

    def __init__(self) -> None:
        super().__init__()
        self.compose = dspy.Predict(ComposeResponse)

    def forward(self, bundle: EvidenceBundle, conclusion: Answer, rationale: str) -> ResponseResult:
        words = current().settings.passage_words
        evidence = format_passages([*bundle.local_passages, *bundle.all_dynamic_passages()], words)
        result = run_stage(
            "response",
            self.compose,
            # The whole conversation, as the pathways saw it: the response is what a rubric grades, and it must
            # answer the last turn in the light of the earlier ones (HealthBench), not the last turn alone.
            question=render_question(bundle.question),
            conclusion=conclusion.display(),
            rationale=rationale,
            evidence=evidence,
        )
        text = result.prediction.response if result.prediction is not None else None
        return ResponseResult(response=text, error=result.error)
