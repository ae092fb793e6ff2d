"""Answering a multiple-choice step by scoring the option letters instead of generating them.

The step's own predictor supplies the prompt: its signature (instructions included, as an optimizer left
them) and its demos, formatted by DSPy's ChatAdapter exactly as a generation call would be, with the answer
field moved first. The assistant turn is opened up to the answer marker and the backbone's next-token
distribution over the option letters is read in one forward pass (`clearmed.backbones.scoring`).

- single answer: the letters' probabilities, renormalised; the answer is the most probable letter;
- several answers allowed: a per-option probability, P("yes") to "is option X one of the correct answers?"
  asked after the same prompt (the prompt prefix is shared, so each option costs only its short tail); the
  answer is every option at or above one half, or the most probable one if none is.

Backbones without log-probabilities return None here and the caller generates as before. Measured on the
embedded model (MMLU-Med, issue 16): scoring keeps the signal that generation loses to the model's letter
prior and to prose around the letter.
"""

from __future__ import annotations

import time
from typing import Final

import dspy

from clearmed.backbones.scoring import ScoringError, TokenScorer, scorer_for
from clearmed.programs._run_context import current
from clearmed.programs._stage import lm_name
from clearmed.programs.settings import Stage
from clearmed.signatures.records import Answer, CallUsage, OptionScores, Question

__all__ = ["ANSWER_MARKER", "answer_first", "run_scored_stage"]

ANSWER_MARKER: Final = "[[ ## answer ## ]]\n"
_YES_NO: Final = ("yes", "no")


def answer_first(signature: type[dspy.Signature]) -> type[dspy.Signature]:
    """The signature with `answer` as its only output field: what is scored is all the prompt asks for."""
    scored = signature
    for name in list(signature.output_fields):
        if name != "answer":
            scored = scored.delete(name)
    return scored


def run_scored_stage(
    stage: Stage, predictor: dspy.Predict, question: Question, /, **inputs: object
) -> OptionScores | None:
    """Score ``question``'s options with ``predictor``'s prompt under the run context, recording usage.

    None when scoring is off, the question has no options, or the stage's backbone cannot score (the caller then
    generates); a failed scoring call is recorded as a failed usage row and also returns None.
    """
    context = current()
    if context.settings.mcq_decoding != "score" or not question.options:
        return None
    role, lm = context.lm_for(stage)
    scorer = scorer_for(lm) if lm is not None else None
    if scorer is None:
        return None
    signature = answer_first(predictor.signature)
    messages = dspy.ChatAdapter().format(signature, list(predictor.demos), dict(inputs))
    started = time.perf_counter()
    try:
        scores, prompt_tokens, passes = _score(scorer, messages, question)
    except ScoringError:
        seconds = round(time.perf_counter() - started, 4)
        context.ledger.add(CallUsage(stage=stage, role=role, model=lm_name(lm), seconds=seconds, failed=True))
        return None
    context.ledger.add(
        CallUsage(
            stage=stage, role=role, model=lm_name(lm), calls=passes, prompt_tokens=prompt_tokens,
            seconds=round(time.perf_counter() - started, 4),
        )
    )  # fmt: skip
    _trace(predictor, inputs, scores)
    return scores


def _score(scorer: TokenScorer, messages: list[dict[str, str]], question: Question) -> tuple[OptionScores, int, int]:
    letters = list(question.options or {})
    if question.answer_mode != "multi":
        result = scorer.score_next_token(messages, ANSWER_MARKER, letters)
        probs = {k: round(v, 6) for k, v in result.distribution().items()}
        best = max(probs, key=probs.__getitem__)
        return OptionScores(probs=probs, letters=(best,), letter_mass=round(result.mass, 6)), result.prompt_tokens, 1
    probs = {}
    tokens = 0
    for letter, text in (question.options or {}).items():
        asked = [*messages[:-1], {**messages[-1], "content": messages[-1]["content"] + _option_question(letter, text)}]
        result = scorer.score_next_token(asked, "", list(_YES_NO))
        probs[letter] = round(result.distribution()["yes"], 6)
        tokens += result.prompt_tokens
    likely = tuple(sorted(letter for letter, p in probs.items() if p >= 0.5))
    return (
        OptionScores(probs=probs, letters=likely or (max(probs, key=probs.__getitem__),), per_option=True),
        tokens,
        len(probs),
    )


def _option_question(letter: str, text: str) -> str:
    return f"\n\nIs option {letter} ({text}) one of the correct answers? Reply with yes or no only."


def _trace(predictor: dspy.Predict, inputs: dict[str, object], scores: OptionScores) -> None:
    """Put the scored answer in DSPy's trace, as a generated one would be, so optimizers can bootstrap demos."""
    trace = dspy.settings.trace
    if trace is None:
        return
    fields = predictor.signature.output_fields
    outputs: dict[str, object] = {name: [] if "list" in str(f.annotation) else "" for name, f in fields.items()}
    outputs["answer"] = Answer(letters=scores.letters).display()
    trace.append((predictor, dict(inputs), dspy.Prediction(**outputs)))
