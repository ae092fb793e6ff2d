"""Counting a prompt's tokens the way the server does, where it can.

The prompt fit estimates tokens from characters (`programs.lm.prompting`, 3.2 per token): no tokenizer of a remote
model is at hand. Servers that have one say how many tokens a text is:

- vLLM and SGLang: ``POST /tokenize`` ``{"model", "prompt"}`` -> ``{"count", "tokens", "max_model_len"}``;
- llama.cpp's llama-server: ``POST /tokenize`` ``{"content"}`` -> ``{"tokens"}``;
- llama-cpp-python's server: ``POST /extras/tokenize/count`` ``{"input"}`` -> ``{"count"}``.

One ``/tokenize`` body carries both spellings (each server ignores the other's field), so one request serves all three
of the first kind. The endpoint that answers is remembered; a server with neither is remembered too, and the estimate
is used for it (the stage's usage row records which counter it used).
"""

from __future__ import annotations

from typing import Any, Literal

from clearmed.backbones.context_window import Unreachable, request_json, server_root

__all__ = ["ServerTokenCounter", "TokenCounter"]

TokenCounter = Literal["server", "estimate"]


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
