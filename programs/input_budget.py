"""The input budget: a question too long for the backbone's context is refused before any model call.

A prompt over the context window fails in every stage (or, worse, is cut silently by the server), and a
truncated clinical vignette may lose the finding that decides it. So an oversized question is refused with a
clear, recorded reason (a failed Decision in an evaluation; one error line from `clearmed ask`), never
answered from a part of itself. `ProgramSettings.max_question_words` sets the budget.
"""

from __future__ import annotations

from clearmed.programs.settings import ProgramSettings
from clearmed.signatures.records import AdjudicationStep, Decision, EvidenceBundle, Question, Thresholds


def question_words(question: Question) -> int:
    """Words the model would read for this question: text, context, options and earlier conversation turns."""
    parts = [question.text, question.context or "", *(question.options or {}).values()]
    parts += [turn.content for turn in question.conversation or []]
    return sum(len(part.split()) for part in parts)


def over_budget(question: Question, settings: ProgramSettings) -> str | None:
    """Why the question cannot be answered within the budget, or None when it fits."""
    budget = settings.max_question_words
    words = question_words(question)
    if budget is None or words <= budget:
        return None
    return (
        f"the question is {words} words, over the input budget of {budget} words "
        "(program.max_question_words); shorten it or raise the budget for a backbone with a longer context"
    )


def refused_decision(question: Question, reason: str, program: str, thresholds: Thresholds | None = None) -> Decision:
    """A failed Decision that records the refusal; no model was called."""
    return Decision(
        question_id=question.id,
        status="failed",
        bundle=EvidenceBundle(question=question, candidates=[]),
        steps=[AdjudicationStep(mechanism="fallback", trigger="input", rule="input_over_budget", outcome=reason)],
        deciding_rule="input_over_budget",
        thresholds=thresholds or Thresholds(),
        error=reason,
        program=program,
    )
