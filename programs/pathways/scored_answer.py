"""Answering a multiple-choice step by scoring the option letters instead of generating them.

The step's own predictor supplies the prompt: its signature (instructions included, as an optimizer left
them) and its demos, in DSPy's ChatAdapter format, exactly as a generation call would be, with the answer field
moved first; the assistant turn is opened up to the answer marker. (A plain one-turn layout and evidence before
the question were measured and did not pay: docs/results.md.) The backbone's next-token distribution over the option letters is read in one forward pass
(`clearmed.backbones.logprobs`).

- single answer: the letters' probabilities, renormalised; the answer is the most probable letter;
- several answers allowed: a per-option probability, P("yes") to "is option X one of the correct answers?"
  asked at the end of the same prompt's last user turn (the prompt prefix is shared, so each option costs only its
  short tail); the answer is every option at or above one half, or the most probable one if none is. The question
  is asked where its answer is the next token: the assistant turn is opened up to the answer marker, as for a
  single answer (DSPy's format tells the model to start with ``[[ ## answer ## ]]``, so an unopened turn would be
  read at ``[[``). "yes" and "no" are read in every case and spacing ("Yes", " No" ...: `clearmed.backbones.logprobs.spellings`).

Scores are cached like generated answers: under DSPy's cache (memory and disk), keyed by the model, the scored
messages and the options, whenever the LM caches its own calls. A program that shares a prompt with an earlier
run (Direct is CLEAR's parametric pathway, MedRAG its local one) then reuses that run's scoring passes, and its
usage rows count them as cache hits, as for generation.

Every pass reaches DSPy's callbacks as a call of the stage's LM (`clearmed.backbones.logprobs.TracedScorer`), one
served from the cache too, marked as a cache hit, so a tracer counts the same calls on a warm cache as on a cold one.

Evidence binding (`passage_only_scores`): the same step's prompt scored again with the question removed, passages
and options only, gives p(o | P), the passages' support for each option whatever the question (TrustMargin, arXiv
2606.08397, scores its context-only answer from its RAG prompt with an empty question; so does this).

Backbones without log-probabilities return None here and the caller generates as before. Measured on the
embedded model (MMLU-Med, issue 16): scoring keeps the signal that generation loses to the model's letter
prior and to prose around the letter.
"""

from __future__ import annotations

import math
import time
from typing import Any, Final

import dspy

from clearmed.backbones.endpoint_cache import CACHE_ENDPOINT_FIELD, cache_endpoint
from clearmed.backbones.logprobs import TokenScorer, TracedScorer, token_scorer
from clearmed.core.errors import FatalServiceError
from clearmed.programs.lm.context import current
from clearmed.programs.lm.prompting import fit_prompt
from clearmed.programs.lm.stage import context_window, is_cacheable, lm_name
from clearmed.signatures.records import Answer, BindingFallback, CallUsage, Candidate, OptionScores, Passage, Question
from clearmed.signatures.records.settings import Stage

__all__ = ["ANSWER_MARKER", "answer_first", "passage_only_scores", "run_scored_stage"]

ANSWER_MARKER: Final = "[[ ## answer ## ]]\n"
_YES_NO: Final = ("yes", "no")
# Part of every cache key: bump it when what a scoring pass computes changes, so old entries are not served.
# v2: P(yes) read after the answer marker in the chat format, summed over yes/Yes/YES (and no ...).
_CACHE_KIND: Final = "clearmed.option_scores/v2"
# A cached probability of 0 reported to a tracer as a log-probability.
_TINY: Final = 1e-12


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
    generates); a failed scoring call (`ScoringError`, an engine's context overflow, any other exception) is
    recorded as a failed usage row and also returns None.
    """
    return _run_scored(stage, predictor, question, inputs, traced=True)


def _run_scored(
    stage: Stage, predictor: dspy.Predict, question: Question, inputs: dict[str, object], *, traced: bool
) -> OptionScores | None:
    """`run_scored_stage`; ``traced``: put the answer in DSPy's trace (off for a pass that is not the step's answer,
    such as the binding pass, whose prompt lacks the question an optimizer's demo needs)."""
    context = current()
    if context.settings.mcq_decoding != "score" or not question.options:
        return None
    role, lm = context.lm_for(stage)
    scorer = token_scorer(lm) if lm is not None else None
    if scorer is None:
        return None
    signature = answer_first(predictor.signature)
    # Fitted to the window as a generated answer is (`fit_prompt`): the scored answer reads one token, and a
    # several-answer question's option tail is within the fit's margin.
    fit = fit_prompt(predictor, dspy.ChatAdapter(), inputs, window=context_window(lm), output_budget=1)
    messages = dspy.ChatAdapter().format(signature, list(predictor.demos), dict(fit.inputs))
    prefix = ANSWER_MARKER
    started = time.perf_counter()

    def record(**usage: Any) -> None:  # one usage row for this pass, timed from the cache lookup
        seconds = round(time.perf_counter() - started, 4)
        row = CallUsage(stage=stage, role=role, model=lm_name(lm), seconds=seconds, **usage)
        dropped = {"passages_dropped": fit.dropped, "passages_dropped_ids": list(fit.dropped_ids)}
        context.ledger.add(row.model_copy(update={**dropped, "fit_tokens": fit.limit}))

    request = _cache_request(lm, messages, prefix, question) if is_cacheable(lm) else None
    scores = _cached(request)
    if scores is not None:
        record(calls=0, cached=True)
        _announce_cached(scorer, messages, prefix, question, scores)
    else:
        try:
            scores, prompt_tokens, passes = _score(scorer, messages, prefix, question)
        except FatalServiceError:  # a refused key or balance stops the run, as for a generated answer
            raise
        except Exception as exc:  # a scoring failure never ends the question (an engine's context overflow included)
            # Recorded as failed, with why; the caller then generates, and generation records its own error if the
            # prompt cannot fit at all or the server is still failing.
            record(failed=True, error=" ".join(f"{type(exc).__name__}: {exc}".split())[:300])
            return None
        record(calls=passes, prompt_tokens=prompt_tokens)
        if request is not None:
            dspy.cache.put(request, scores.model_dump(mode="json"))
    if traced:
        _trace(predictor, inputs, scores)
    return scores


def passage_only_scores(
    stage: Stage,
    predictor: dspy.Predict,
    question: Question,
    candidate: Candidate,
    passages: list[Passage],
    /,
    **inputs: object,
) -> OptionScores | BindingFallback:
    """p(o | P) for an evidence pathway: its step's prompt (``inputs``, as it answered) scored with the question field
    emptied, passages and options left as they were; or why it cannot be had (`BindingFallback`).

    A backbone without log-probabilities, a pathway whose answer was not scored, and one with no passages are named
    before any call; a failed pass is recorded as a failed usage row of ``stage`` (`run_scored_stage`)."""
    _, lm = current().lm_for(stage)
    if lm is None or token_scorer(lm) is None:
        return "no_logprobs"
    if candidate.option_scores is None or candidate.option_scores.per_option:
        return "not_scored"
    if not passages:
        return "no_passages"
    scores = _run_scored(stage, predictor, question, {**inputs, "question": ""}, traced=False)
    return scores if scores is not None else "scoring_failed"


def _cache_request(
    lm: dspy.BaseLM | None, messages: list[dict[str, str]], prefix: str, question: Question
) -> dict[str, object]:
    """What a scoring pass depends on: the model and the server it is asked on (a cache hit never crosses endpoints),
    the exact messages and prefix, and the options scored."""
    return {
        "kind": _CACHE_KIND,
        "model": lm_name(lm),
        CACHE_ENDPOINT_FIELD: cache_endpoint(lm),
        "messages": messages,
        "prefix": prefix,
        "options": dict(question.options or {}),
        "answer_mode": question.answer_mode,
    }


def _cached(request: dict[str, object] | None) -> OptionScores | None:
    if request is None:
        return None
    value = dspy.cache.get(request)
    if not isinstance(value, dict):
        return None
    try:
        return OptionScores.model_validate(value)
    except ValueError:  # an entry from an incompatible version: score afresh (and overwrite it)
        return None


def _announce_cached(
    scorer: TracedScorer, messages: list[dict[str, str]], prefix: str, question: Question, scores: OptionScores
) -> None:
    """Report a cached answer's passes to DSPy's callbacks as the passes `_score` made, each marked a cache hit."""
    if not scores.per_option:
        logprobs = {k: math.log(max(p, _TINY)) for k, p in scores.probs.items()}
        scorer.announce_cached(messages, prefix, list(scores.probs), logprobs)
        return
    for letter, text in (question.options or {}).items():
        asked = _option_messages(messages, letter, text)
        p = scores.probs.get(letter, 0.0)
        logprobs = {"yes": math.log(max(p, _TINY)), "no": math.log(max(1.0 - p, _TINY))}
        scorer.announce_cached(asked, prefix, list(_YES_NO), logprobs)


def _score(
    scorer: TokenScorer, messages: list[dict[str, str]], prefix: str, question: Question
) -> tuple[OptionScores, int, int]:
    letters = list(question.options or {})
    if question.answer_mode != "multi":
        result = scorer.score_next_token(messages, prefix, letters)
        probs = {k: round(v, 6) for k, v in result.distribution().items()}
        best = max(probs, key=probs.__getitem__)
        return OptionScores(probs=probs, letters=(best,), letter_mass=round(result.mass, 6)), result.prompt_tokens, 1
    probs = {}
    tokens = 0
    for letter, text in (question.options or {}).items():
        asked = _option_messages(messages, letter, text)
        result = scorer.score_next_token(asked, prefix, list(_YES_NO))
        probs[letter] = round(result.distribution()["yes"], 6)
        tokens += result.prompt_tokens
    likely = tuple(sorted(letter for letter, p in probs.items() if p >= 0.5))
    return (
        OptionScores(probs=probs, letters=likely or (max(probs, key=probs.__getitem__),), per_option=True),
        tokens,
        len(probs),
    )


def _option_messages(messages: list[dict[str, str]], letter: str, text: str) -> list[dict[str, str]]:
    """The messages of one option's yes/no pass: the step's prompt with the option's question after its last turn (a
    pass `_score` makes and a cache hit's announcement to callbacks name the same messages)."""
    question = f"\n\nIs option {letter} ({text}) one of the correct answers? Reply with yes or no only."
    return [*messages[:-1], {**messages[-1], "content": messages[-1]["content"] + question}]


def _trace(predictor: dspy.Predict, inputs: dict[str, object], scores: OptionScores) -> None:
    """Put the scored answer in DSPy's trace, as a generated one would be, so optimizers can bootstrap demos."""
    trace = dspy.settings.trace
    if trace is None:
        return
    fields = predictor.signature.output_fields
    outputs: dict[str, object] = {name: [] if "list" in str(f.annotation) else "" for name, f in fields.items()}
    outputs["answer"] = Answer(letters=scores.letters).display()
    trace.append((predictor, dict(inputs), dspy.Prediction(**outputs)))
