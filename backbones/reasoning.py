"""Reasoning models: the thinking a model writes before its answer, kept apart from the answer.

Qwen3, DeepSeek-R1 and their kin write ``<think>...</think>`` before the answer unless the server splits it off
(vLLM with ``--reasoning-parser``, which returns it as ``reasoning_content``). `split_thinking` is the rule, as a pure
function; `clearmed.backbones.client.ClearmedLM` applies it to every completion of every backbone, so DSPy's adapter
only ever parses the answer. The thinking is kept in three places: the output DSPy returns (``reasoning_content``, the
key DSPy itself uses when a server splits reasoning off), the `collect_thinking()` scopes open around the call (for
the trail), and DSPy's ``lm.history`` (the raw completion, unchanged).

A model that thinks first needs room to: `REASONING_MAX_TOKENS` is the output budget of a ``reasoning = true``
backbone when its config sets none, and the floor of every call's budget (a per-stage cap of 256 tokens would be
spent thinking, and the answer cut off).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final, NamedTuple

__all__ = ["REASONING_MAX_TOKENS", "ThinkingLog", "Thought", "collect_thinking", "record_thinking", "split_thinking"]

# Output tokens a reasoning backbone may always write (thinking and answer together). Qwen3 on medical vignettes
# thinks for 1-4k tokens; 8k leaves the answer room after a long thought.
REASONING_MAX_TOKENS: Final = 8192

_TAG = re.compile(r"<(/?)think\s*>", re.IGNORECASE)


class Thought(NamedTuple):
    """A completion split in two: what the model answered, and what it thought first ("" when it did not)."""

    answer: str
    thinking: str


def split_thinking(text: str) -> Thought:
    """Take every ``<think>`` block out of a completion; the rest is the answer.

    - each ``<think>...</think>`` block is thinking, wherever it stands;
    - a ``</think>`` with no opening tag closes a block the chat template opened in the prompt (Qwen3 does this): what
      came before it is thinking;
    - an unclosed ``<think>`` is a thought cut off by the output budget: everything after it is thinking, and none of
      it may reach the answer (the answer is then what came before the tag, usually nothing).
    """
    if "think" not in text.lower() or not _TAG.search(text):
        return Thought(text, "")
    answer: list[str] = []
    thinking: list[str] = []
    inside = False
    start = 0
    for tag in _TAG.finditer(text):
        segment = text[start : tag.start()]
        closing = tag.group(1) == "/"
        if inside and closing:
            thinking.append(segment)
            inside = False
        elif inside:  # a nested opening tag: still the same thought
            thinking.append(segment)
        elif closing:  # a block opened by the template: what this block's answer part held was thinking
            thinking.append("".join(answer) + segment)
            answer.clear()
        else:
            answer.append(segment)
            inside = True
        start = tag.end()
    (thinking if inside else answer).append(text[start:])
    return Thought("".join(answer).strip(), "\n\n".join(part.strip() for part in thinking if part.strip()))


class ThinkingLog:
    """The thinking of every completion made inside one `collect_thinking()` scope, in call order."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._lock = threading.Lock()

    def add(self, text: str) -> None:
        with self._lock:
            self.texts.append(text)

    @property
    def text(self) -> str:
        with self._lock:
            return "\n\n".join(self.texts)


_SCOPE: ContextVar[ThinkingLog | None] = ContextVar("clearmed_thinking_scope", default=None)


@contextmanager
def collect_thinking() -> Iterator[ThinkingLog]:
    """Collect the thinking of the completions made inside the block (context-local, like `count_retries`)."""
    log = ThinkingLog()
    token = _SCOPE.set(log)
    try:
        yield log
    finally:
        _SCOPE.reset(token)


def record_thinking(text: str) -> None:
    """Add one completion's thinking to the innermost open scope (no scope: nothing kept beyond DSPy's history)."""
    log = _SCOPE.get()
    if log is not None and text:
        log.add(text)
