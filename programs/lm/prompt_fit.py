"""Fitting a stage's prompt into its backbone's context window by leaving out the lowest-ranked passages.

A prompt past the window fails the call (``ContextWindowExceededError``), and the stage is then degraded. The static
budgets in ``[program]`` (``verifier_passages``, ``passage_words``) suit one backbone; this one follows the LM the stage
runs on: `run_stage` asks `fit_prompt` before each call, with the LM's ``context_window`` (`ClearmedLM` resolves it
from the config or the server: `backbones.context_window`) less the stage's output budget.

Tokens are estimated, not counted: no tokenizer is at hand for a remote model. ``_CHARS_PER_TOKEN`` = 3.2 is below
English prose's ~4 characters per token, because clinical terms, numbers and ids split into more tokens; and a margin
(``_MARGIN_SHARE`` of the window plus ``_MARGIN_TOKENS`` for the chat template's own tokens) is kept free on top.
Passages are dropped whole, last first in each evidence field (the renderers put passages in retrieval order, cited
ones kept first by the verifier's selection), from whichever field holds the most, so that no pathway loses all its
evidence while another keeps many. What is left out is said in the field itself and on the stage's usage row.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import dspy

from clearmed.programs.lm.formatting import passage_blocks

__all__ = ["PromptFit", "estimate_tokens", "fit_prompt", "prompt_limit"]

_CHARS_PER_TOKEN = 3.2
_MARGIN_SHARE = 0.05
_MARGIN_TOKENS = 64
_LEFT_OUT = re.compile(r"\n\((\d+) lower-ranked passages? left out to fit the model's context window\)$")


@dataclass(frozen=True)
class PromptFit:
    """The inputs to call with, and how many passages were left out to fit ``limit`` prompt tokens."""

    inputs: dict[str, object]
    dropped: int = 0
    limit: int | None = None


def estimate_tokens(text: str) -> int:
    return int(len(text) / _CHARS_PER_TOKEN) + 1


def _prompt_tokens(predictor: dspy.Module, adapter: dspy.Adapter, inputs: Mapping[str, object]) -> int:
    """The estimated prompt as the adapter would send it (instructions, demos and all), or the inputs' text alone
    when the predictor cannot be formatted here."""
    predictors = predictor.predictors()
    try:
        messages = adapter.format(predictors[0].signature, list(predictors[0].demos), dict(inputs))
        text = "".join(str(message.get("content", "")) for message in messages)
    except Exception:  # an unusual module: estimate from what it is given
        text = "".join(str(value) for value in inputs.values())
    return estimate_tokens(text)


def prompt_limit(window: int, output_budget: int | None) -> int:
    """Prompt tokens a call may hold: the window less the output budget and the safety margin."""
    return window - (output_budget or 0) - int(window * _MARGIN_SHARE) - _MARGIN_TOKENS


def _drop_last(text: str) -> str:
    """``text`` without its last passage block, saying how many are left out."""
    blocks = passage_blocks(text)
    last = blocks[-1]
    found = _LEFT_OUT.search(text)
    before = int(found.group(1)) if found else 0
    body = text[: found.start()] if found else text
    body = (body[: last.start()].rstrip("\n") + body[last.end() :]).strip("\n") or "(no passages)"
    count = before + 1
    plural = "passage" if count == 1 else "passages"
    return f"{body}\n({count} lower-ranked {plural} left out to fit the model's context window)"


def fit_prompt(
    predictor: dspy.Module,
    adapter: dspy.Adapter,
    inputs: Mapping[str, object],
    *,
    window: int | None,
    output_budget: int | None,
) -> PromptFit:
    """``inputs`` with passages left out until the estimated prompt fits ``window`` (unchanged when it already
    does, when no window is known, or when no passage is left to drop: the call then says whether it fits)."""
    fitted = dict(inputs)
    if window is None:
        return PromptFit(fitted)
    limit = prompt_limit(window, output_budget)
    dropped = 0
    while _prompt_tokens(predictor, adapter, fitted) > limit:
        counts = {name: len(passage_blocks(value)) for name, value in fitted.items() if isinstance(value, str)}
        name = max(counts, key=lambda key: (counts[key], len(str(fitted[key]))), default=None)
        if name is None or counts[name] == 0:
            break
        fitted[name] = _drop_last(str(fitted[name]))
        dropped += 1
    return PromptFit(fitted, dropped=dropped, limit=limit if dropped else None)
