"""`ClearmedLM`: the `dspy.LM` every backbone is built as (`backbones.factory.build_lm`).

DSPy's LM does the calling, caching, retrying (with clearmed's wait: `backbones.retry_wait`) and history. On top:

1. **Thinking out of the answer.** Every completion goes through `reasoning.split_thinking` before DSPy's adapter
   parses it. A completion that held ``<think>`` comes back as ``{"text": answer, "reasoning_content": thinking}``,
   the shape DSPy itself returns when a server splits reasoning off; the thinking is also added to the caller's
   `reasoning.collect_thinking()` scopes. ``lm.history`` keeps the raw completion.
2. **Room to think.** For a backbone that thinks (`BackboneConfig.min_output_tokens`), a call's ``max_tokens`` is
   raised to that floor: a stage's small cap would otherwise be spent on the thought and the answer cut off.
3. **Fatal errors stop.** An authentication, billing/quota or missing-model error (DSPy never retries those) is raised
   as `clearmed.errors.FatalServiceError`, with the DSPy error as its cause; every other error passes unchanged.
"""

from __future__ import annotations

import re
from typing import Any

import dspy
from dspy.utils.exceptions import (
    LMAuthError,
    LMBillingError,
    LMInvalidRequestError,
    LMNotConfiguredError,
    LMUnsupportedModelError,
)

from clearmed.backbones.config import BackboneConfig
from clearmed.backbones.context_window import context_window
from clearmed.backbones.reasoning import record_thinking, split_thinking
from clearmed.errors import FatalCause, FatalServiceError

__all__ = ["ClearmedLM", "fatal_lm_error", "strip_thinking"]

# Server text quoted in a fatal error's one line is cut here.
_MAX_DETAIL = 160
_LITELLM_PREFIX = re.compile(r"^litellm\.\w+: (?:\w+: )?(?:\w+Exception - )?")


class ClearmedLM(dspy.LM):
    """`dspy.LM` that strips thinking, leaves a thinking backbone room, and raises fatal errors as such."""

    def __init__(
        self,
        model: str,
        *,
        service: str = "",
        min_output_tokens: int | None = None,
        backbone: BackboneConfig | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, **kwargs)
        # Names the backbone in a fatal error's one line ("main backbone openai/o3-mini").
        self.service = service or f"LM {model}"
        self.min_output_tokens = min_output_tokens
        self.backbone = backbone
        self._window: int | None = None
        self._window_known = backbone is None

    @property
    def context_window(self) -> int | None:
        """Tokens per call (`backbones.context_window`), looked up on first use, since asking a server is a request
        and building an LM makes none; None without a backbone config or when nothing reports it."""
        if not self._window_known and self.backbone is not None:
            self._window = context_window(self.backbone, self)  # two threads may both ask once: same answer
            self._window_known = True
        return self._window

    def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        try:
            outputs = super().__call__(prompt, messages=messages, **self._room_to_think(kwargs))
        except dspy.LMError as exc:
            fatal = fatal_lm_error(exc, self.service, secret=self.kwargs.get("api_key"))
            if fatal is None:
                raise
            raise fatal from exc
        return strip_thinking(outputs)

    async def acall(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        try:
            outputs = await super().acall(prompt, messages=messages, **self._room_to_think(kwargs))
        except dspy.LMError as exc:
            fatal = fatal_lm_error(exc, self.service, secret=self.kwargs.get("api_key"))
            if fatal is None:
                raise
            raise fatal from exc
        return strip_thinking(outputs)

    def _room_to_think(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        floor = self.min_output_tokens
        asked = kwargs.get("max_tokens")
        if floor is None or not isinstance(asked, int) or asked >= floor:
            return kwargs
        return {**kwargs, "max_tokens": floor}


def fatal_lm_error(exc: BaseException, service: str, *, secret: object = None) -> FatalServiceError | None:
    """The `FatalServiceError` an LM error means, or None for an error a run survives (rate limits, timeouts,
    server errors, a refused prompt). ``secret`` (the key that was sent) is replaced in the quoted server text."""
    cause: FatalCause
    if isinstance(exc, LMAuthError | LMNotConfiguredError):
        cause = "auth"
    elif isinstance(exc, LMBillingError):
        cause = "billing"
    elif isinstance(exc, LMUnsupportedModelError) or (
        # vLLM's older error body ({"message": ..., "code": 404}) is not read as a missing model by the native
        # engine; a 404 from a chat endpoint means the model or the endpoint is not there, for every call.
        isinstance(exc, LMInvalidRequestError) and getattr(exc, "status", None) == 404
    ):
        cause = "model_not_found"
    else:
        return None
    # The provider's own sentence: the first line (the native engine appends remedies below it), without the
    # "litellm.AuthenticationError: AuthenticationError: OpenAIException - " prefix of the LiteLLM engine.
    lines = str(getattr(exc, "message", "") or "").strip().splitlines()
    detail = _LITELLM_PREFIX.sub("", lines[0].strip()) if lines else ""
    if isinstance(secret, str) and len(secret) >= 4:
        detail = detail.replace(secret, "***")
    if len(detail) > _MAX_DETAIL:
        detail = detail[: _MAX_DETAIL - 3] + "..."
    status = getattr(exc, "status", None)
    return FatalServiceError(service, cause, detail, status=status if isinstance(status, int) else None)


def strip_thinking(outputs: Any) -> Any:
    """DSPy's outputs (a list of str or dict completions) with each completion's thinking split off; anything else
    (a typed `lm15.Response` from an explicit Request) is returned as it came."""
    if not isinstance(outputs, list):
        return outputs
    return [_strip_one(output) for output in outputs]


def _strip_one(output: Any) -> Any:
    if isinstance(output, str):
        answer, thinking = split_thinking(output)
        if not thinking:
            return output
        record_thinking(thinking)
        return {"text": answer, "reasoning_content": thinking}
    if not isinstance(output, dict):
        return output
    text = output.get("text")
    if not isinstance(text, str):
        text = ""
    answer, written = split_thinking(text)
    given = output.get("reasoning_content")  # a server that split the thinking off (vLLM --reasoning-parser)
    thinking = "\n\n".join(part for part in (given if isinstance(given, str) else "", written) if part)
    record_thinking(thinking)
    if not written:
        return output
    return {**output, "text": answer, "reasoning_content": thinking}
