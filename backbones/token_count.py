"""Counting a prompt's tokens the way the model does, where its tokenizer is known.

The prompt fit estimates tokens from characters (`programs.lm.prompting`, 3.2 per token) unless the LM can count them
(`ClearmedLM.count_tokens`). A hosted OpenAI model's tokenizer is tiktoken's encoding for it (`TiktokenCounter`: o200k
for gpt-4o and the o-series, cl100k for gpt-4 and gpt-3.5), read from the encoding files LiteLLM bundles, so counting
never downloads anything; a model tiktoken does not know, or whose encoding is not bundled, keeps the estimate.
Servers that have a tokenizer say how many tokens a text is:

- vLLM and SGLang: ``POST /tokenize`` ``{"model", "prompt"}`` -> ``{"count", "tokens", "max_model_len"}``;
- llama.cpp's llama-server: ``POST /tokenize`` ``{"content"}`` -> ``{"tokens"}``;
- llama-cpp-python's server: ``POST /extras/tokenize/count`` ``{"input"}`` -> ``{"count"}``.

One ``/tokenize`` body carries both spellings (each server ignores the other's field), so one request serves all three
of the first kind. The endpoint that answers is remembered; a server with neither is remembered too, and the estimate
is used for it (the stage's usage row records which counter it used).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any, Final, Literal, Protocol

from clearmed.backbones.context_window import Unreachable, request_json, server_root

__all__ = ["ServerTokenCounter", "TextCounter", "TiktokenCounter", "TokenCounter", "tiktoken_counter"]

TokenCounter = Literal["server", "estimate"]


class TextCounter(Protocol):
    def count(self, text: str) -> int | None: ...


# The encodings LiteLLM ships in litellm/litellm_core_utils/tokenizers (tiktoken's cache layout): counted offline.
_BUNDLED: Final = frozenset({"o200k_base", "cl100k_base", "p50k_base"})


class TiktokenCounter:
    """Counts text with tiktoken's encoding ``encoding`` (by name: the LM stays picklable)."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding

    def count(self, text: str) -> int | None:
        import tiktoken

        return len(tiktoken.get_encoding(self.encoding).encode(text, disallowed_special=())) if text else None


def tiktoken_counter(model: str) -> TiktokenCounter | None:
    """The exact counter of an OpenAI model (``openai/gpt-4o`` or ``gpt-4o``), or None: another provider, a model
    tiktoken does not map, or an encoding that would have to be downloaded."""
    provider, _, name = model.rpartition("/")
    if provider not in ("", "openai") or not _bundled_files():
        return None
    try:
        import tiktoken

        encoding = tiktoken.encoding_name_for_model(name)
    except (ImportError, KeyError):
        return None
    return TiktokenCounter(encoding) if encoding in _BUNDLED else None


def _bundled_files() -> bool:
    """Point tiktoken at LiteLLM's bundled encodings (as importing LiteLLM does), unless the user named a cache; False
    when neither is there (tiktoken would download the files)."""
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        return True
    spec = importlib.util.find_spec("litellm")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    bundled = Path(locations[0]) / "litellm_core_utils" / "tokenizers" if locations else None
    if bundled is None or not bundled.is_dir():
        return False
    os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)
    return True


def _count(payload: Any) -> int | None:
    if not isinstance(payload, dict):
        return None
    count = payload.get("count")
    if isinstance(count, int) and not isinstance(count, bool):
        return count
    tokens = payload.get("tokens")
    return len(tokens) if isinstance(tokens, list) else None


class ServerTokenCounter:
    """Counts text with the tokenizer of the server at ``api_base`` (``.../v1``); None when it has none or cannot be
    asked right now."""

    def __init__(self, api_base: str, model: str, api_key: str | None, *, timeout: float = 10.0) -> None:
        root = server_root(api_base)
        self.model = model
        self._api_key = api_key
        self.timeout = timeout
        self._urls = (root + "/tokenize", root + "/extras/tokenize/count")  # plain data: the LM stays picklable
        self._chosen: int | None = None  # index of the endpoint that answered
        self.available: bool | None = None  # None: not asked yet

    def count(self, text: str) -> int | None:
        if self.available is False or not text:
            return None
        order = [self._chosen] if self._chosen is not None else range(len(self._urls))
        for index in order:
            # One /tokenize body for vLLM and SGLang ("prompt") and llama-server ("content"); llama-cpp-python's "input".
            body = (
                {"model": self.model, "prompt": text, "content": text}
                if index == 0
                else {"model": self.model, "input": text}
            )
            try:
                status, payload = request_json(
                    "POST", self._urls[index], api_key=self._api_key, timeout=self.timeout, body=body
                )
            except Unreachable:
                return None  # not settled: asked again next time
            counted = _count(payload) if status == 200 else None
            if counted:  # 0 for a non-empty text is a server that read neither spelling
                self._chosen, self.available = index, True
                return counted
        if self._chosen is None:
            self.available = False
        return None
