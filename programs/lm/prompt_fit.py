"""Fitting a stage's prompt into its backbone's context window by leaving out the lowest-ranked passages.

A prompt past the window fails the call (``ContextWindowExceededError``), and the stage is then degraded. The static
budgets in ``[program]`` (``verifier_passages``, ``passage_words``) suit one backbone; this one follows the LM the stage
runs on: `run_stage` asks `fit_prompt` before each call, with the LM's ``context_window`` (`ClearmedLM` resolves it
from the config or the server: `backbones.context_window`) less the stage's output budget.

Tokens are estimated, not counted: no tokenizer is at hand for a remote model. ``_CHARS_PER_TOKEN`` = 3.2 is below
English prose's ~4 characters per token, because clinical terms, numbers and ids split into more tokens; and a margin
(``_MARGIN_SHARE`` of the window plus ``_MARGIN_TOKENS`` for the chat template's own tokens) is kept free on top.
Passages are dropped whole, from whichever field holds the most, so that no pathway loses all its evidence while
another keeps many. Within a field, a `RankedEvidence` says which go first (the verifier's and the assessors' views:
uncited first-search passages, then cited ones, then the follow-up pages the guard and audit must judge, each
lowest-ranked first); in any other field the last block goes first (the pathways' evidence is in retrieval order).
What is left out is said in the field itself, and its ids on the stage's usage row.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import dspy

from clearmed.programs.lm.formatting import passage_blocks

__all__ = ["PromptFit", "RankedEvidence", "estimate_tokens", "fit_prompt", "prompt_limit"]

_CHARS_PER_TOKEN = 3.2
_MARGIN_SHARE = 0.05
_MARGIN_TOKENS = 64
_LEFT_OUT = re.compile(r"\n\((\d+) lower-ranked passages? left out to fit the model's context window\)$")
_BLOCK_ID = re.compile(r"^\[([^\]\n]+)\]")


class RankedEvidence(str):
    """A rendered evidence field (a plain ``str`` to DSPy) that names the order its passages may be left out in,
    by id, first to go first. A passage it does not name goes before those it names."""

    drop_order: tuple[str, ...]

    def __new__(cls, text: str, drop_order: Sequence[str] = ()) -> RankedEvidence:
        value = super().__new__(cls, text)
        value.drop_order = tuple(drop_order)
        return value

    def __reduce__(self) -> tuple[type[RankedEvidence], tuple[str, tuple[str, ...]]]:  # copies and pickles keep it
        return RankedEvidence, (str(self), self.drop_order)


@dataclass(frozen=True)
class PromptFit:
    """The inputs to call with, and the passages (`dropped_ids`, in the order they went) left out to fit ``limit``
    prompt tokens."""

    inputs: dict[str, object]
    dropped: int = 0
    limit: int | None = None
    dropped_ids: tuple[str, ...] = ()


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


def _block_id(block: re.Match[str]) -> str:
    found = _BLOCK_ID.match(block.group(0))
    return found.group(1) if found else ""


def _drop_one(text: str, order: Sequence[str]) -> tuple[str, str]:
    """``text`` without one passage block (the first `order` names, else the last), saying how many are left out;
    and the id of the block dropped."""
    blocks = passage_blocks(text)
    rank = {pid: position for position, pid in enumerate(order)}
    # Unnamed blocks first (rank -1), the last of equals first.
    last = min(reversed(blocks), key=lambda block: rank.get(_block_id(block), -1)) if order else blocks[-1]
    found = _LEFT_OUT.search(text)
    before = int(found.group(1)) if found else 0
    body = text[: found.start()] if found else text
    body = (body[: last.start()].rstrip("\n") + body[last.end() :]).strip("\n") or "(no passages)"
    count = before + 1
    plural = "passage" if count == 1 else "passages"
    return f"{body}\n({count} lower-ranked {plural} left out to fit the model's context window)", _block_id(last)


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
    orders = {name: value.drop_order for name, value in inputs.items() if isinstance(value, RankedEvidence)}
    limit = prompt_limit(window, output_budget)
    dropped: list[str] = []
    while _prompt_tokens(predictor, adapter, fitted) > limit:
        counts = {name: len(passage_blocks(value)) for name, value in fitted.items() if isinstance(value, str)}
        name = max(counts, key=lambda key: (counts[key], len(str(fitted[key]))), default=None)
        if name is None or counts[name] == 0:
            break
        fitted[name], passage_id = _drop_one(str(fitted[name]), orders.get(name, ()))
        dropped.append(passage_id)
    return PromptFit(fitted, dropped=len(dropped), limit=limit if dropped else None, dropped_ids=tuple(dropped))
