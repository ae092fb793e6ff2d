"""One failure policy for every LM call: each failure is transient, fatal, an overflow, or deterministic.

- **transient**: a rate limit, a server error, a timeout, a dropped connection, or a 200 whose body is not a reply (a
  truncated JSON body, a proxy's HTML page, no choices, a null or empty message: `EmptyReplyError`). Retried with
  clearmed's backoff (`clearmed.core.retries`); still failing after the retries, the step is recorded as transient and
  the question is degraded, then redone on resume from the caches.
- **fatal**: a refused key, an exhausted balance, a missing model (`fatal_errors.fatal_lm_error`). The run stops
  with one line.
- **overflow**: the prompt is longer than the context window. Never retried as it was sent: the stage learns the
  window from the error, refits the prompt and tries once more (`programs.lm.stage`); an overflow after that is
  recorded as deterministic.
- **deterministic**: any other refusal (a malformed request). Retrying the same request gives the same answer.

Servers word a context overflow in their own way, and DSPy recognises only OpenAI's ``code``. `read_overflow` reads
the window and the prompt's size from every shape we have met (the bodies are in tests/backbones/fixtures/): OpenAI,
vLLM (each release's sentence), SGLang, llama.cpp's llama-server and llama-cpp-python's server, Anthropic.
`install_error_shapes` makes DSPy's native client read the top-level error object of vLLM before 0.7 and of SGLang
(``{"object": "error", "message": ...}``), whose message it otherwise drops, and a context-length sentence as the
context-length error it is, and a 200 without a completion as the failed call it is (`EmptyReplyError`, raised before
DSPy caches the reply, so a retry or a resume asks the server again).
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass
from typing import Any, Final, Literal

import dspy
from dspy.utils.exceptions import (
    ContextWindowExceededError,
    LMInvalidRequestError,
    LMLockTimeoutError,
    LMProviderError,
    LMRateLimitError,
    LMServerError,
    LMTimeoutError,
    LMTransportError,
    LMUnexpectedError,
)

from clearmed.core.errors import FatalServiceError

__all__ = [
    "ContextOverflowError",
    "EmptyReplyError",
    "FailureKind",
    "Overflow",
    "as_overflow",
    "classify",
    "install_error_shapes",
    "is_malformed_reply",
    "read_overflow",
]

FailureKind = Literal["transient", "fatal", "overflow", "deterministic"]

# Phrases that say "the prompt does not fit the window", lower-cased. Each names a server that words it so.
_OVERFLOW_MARKERS: Final = (
    "maximum context length",  # OpenAI, vLLM, llama-cpp-python's server, SGLang (total)
    "longer than the model's context length",  # SGLang, vLLM-derived gateways
    "exceeds the available context size",  # llama.cpp's llama-server
    "exceed context window of",  # llama-cpp-python's engine ("Requested tokens (n) exceed context window of m")
    "longer than the maximum model length",  # vLLM's engine ("The decoder prompt (length n) is longer than ...")
    "prompt is too long",  # Anthropic
    "context_length_exceeded",  # OpenAI's code, llama-cpp-python's server
    "exceed_context_size_error",  # llama-server's type
    "input tokens exceed the configured limit",  # OpenAI (newer models)
)
# The window, each pattern after its server's sentence; the first that matches wins.
_LIMIT: Final = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"maximum context length is (\d+)",  # OpenAI, vLLM, llama-cpp-python's server
        r"maximum context length of (\d+)",  # SGLang (total)
        r"model's context length \((\d+) tokens\)",  # SGLang (input)
        r"available context size \((\d+) tokens\)",  # llama-server (b4000+)
        r"exceed context window of (\d+)",  # llama-cpp-python's engine
        r"maximum model length of (\d+)",  # vLLM's engine
        r"tokens > (\d+) maximum",  # Anthropic
        r"configured limit of (\d+)",  # OpenAI (newer models)
        r"\bn_ctx (\d+)",  # llama-server's body fields, as `install_error_shapes` appends them
    )
)
# The prompt's own size as the server counted it (input tokens, not the requested total).
_PROMPT: Final = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"\((\d+) in the messages",  # vLLM before 0.8, llama-cpp-python's server
        r"prompt contains (?:at least )?(\d+) input tokens",  # vLLM 0.9+
        r"request has (\d+) input tokens",  # vLLM 0.8
        r"messages resulted in (\d+) tokens",  # OpenAI
        r"(\d+) tokens from the input messages",  # SGLang (total)
        r"the input \((\d+) tokens\)",  # SGLang (input)
        r"request \((\d+) tokens\) exceeds",  # llama-server
        r"requested tokens \((\d+)\)",  # llama-cpp-python's engine
        r"prompt \(length (\d+)\)",  # vLLM's engine
        r"prompt is too long: (\d+) tokens",  # Anthropic
        r"n_prompt_tokens (\d+)",  # llama-server's body fields, as `install_error_shapes` appends them
    )
)
# Below this a "window" is a misread number (an HTTP status, a completion budget), not a context window.
_MIN_WINDOW: Final = 256


@dataclass(frozen=True)
class Overflow:
    """What a context-length error said: the window (``limit``) and the prompt's size, each when it said so."""

    limit: int | None = None
    prompt_tokens: int | None = None


def _first(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found:
            return int(found.group(1))
    return None


def read_overflow(message: str, body: Any = None) -> Overflow | None:
    """The overflow ``message`` (and, when given, the error ``body`` it came in) reports, or None when it is not a
    context-length error. llama-server also puts ``n_ctx`` and ``n_prompt_tokens`` in the body."""
    text = " ".join(str(message or "").split())
    error = body.get("error", body) if isinstance(body, dict) else None
    fields = error if isinstance(error, dict) else {}
    if not any(marker in text.lower() for marker in _OVERFLOW_MARKERS) and fields.get("type") not in (
        "exceed_context_size_error",
    ):
        return None
    limit = _first(_LIMIT, text)
    if limit is None and isinstance(fields.get("n_ctx"), int):
        limit = fields["n_ctx"]
    prompt = _first(_PROMPT, text)
    if prompt is None and isinstance(fields.get("n_prompt_tokens"), int):
        prompt = fields["n_prompt_tokens"]
    return Overflow(limit=limit if limit is not None and limit >= _MIN_WINDOW else None, prompt_tokens=prompt)


class ContextOverflowError(ContextWindowExceededError):
    """DSPy's context-window error with what the server said about it: ``limit`` (its window) and ``prompt_tokens``
    (the prompt as it counted it), each None when it did not say."""

    def __init__(self, message: str, *, limit: int | None, prompt_tokens: int | None, **kwargs: Any) -> None:
        super().__init__(message=message, **kwargs)
        self.limit = limit
        self.prompt_tokens = prompt_tokens


class EmptyReplyError(LMProviderError):
    """A 200 that holds no completion: no ``choices``, or a ``null`` or empty message. Transient: the model said
    nothing, and the next attempt may say something (DSPy's adapter would record it as a parse error)."""

    def __init__(
        self,
        message: str = "the server's 200 reply holds no completion (no choices, or a null or empty message)",
        **kwargs: Any,
    ) -> None:
        super().__init__(message=message, status=200, **kwargs)


def _message(exc: BaseException) -> str:
    return str(getattr(exc, "message", "") or exc)


def as_overflow(exc: BaseException) -> ContextOverflowError | None:
    """``exc`` as a `ContextOverflowError` when it is a context overflow (DSPy's own error, or a refused request whose
    text reads as one: vLLM's, SGLang's and llama-server's 400s), else None."""
    if isinstance(exc, ContextOverflowError):
        return exc
    if not isinstance(exc, ContextWindowExceededError | LMInvalidRequestError | LMUnexpectedError):
        return None
    message = _message(exc)
    found = read_overflow(message)
    if found is None:
        if not isinstance(exc, ContextWindowExceededError):
            return None
        found = Overflow()
    overflow = ContextOverflowError(
        message.split("\n\n  To fix:")[0],  # lm15 appends its remedies; the server's sentence is the news
        limit=found.limit,
        prompt_tokens=found.prompt_tokens,
        model=getattr(exc, "model", None),
        provider=getattr(exc, "provider", None),
        status=getattr(exc, "status", None),
    )
    overflow.__cause__ = exc
    return overflow


def is_malformed_reply(exc: BaseException) -> bool:
    """A 200 whose body is no reply (a truncated JSON body, an HTML error page from a proxy): a later attempt may get
    the real one."""
    if not isinstance(exc, LMProviderError | LMUnexpectedError):
        return False
    text = _message(exc).lower()
    return getattr(exc, "status", None) == 200 or "is not json" in text or "jsondecodeerror" in text


_TRANSIENT: Final = (
    LMRateLimitError,
    LMServerError,
    LMTimeoutError,
    LMTransportError,
    LMLockTimeoutError,
    EmptyReplyError,
)


def classify(exc: BaseException) -> FailureKind:
    """Which of the four an exception raised by an LM call is (fatal ones are raised as `FatalServiceError` by the
    client; `backbones.fatal_errors.fatal_lm_error` tells them from the rest)."""
    if isinstance(exc, FatalServiceError):
        return "fatal"
    if as_overflow(exc) is not None:
        return "overflow"
    if isinstance(exc, _TRANSIENT) or is_malformed_reply(exc):
        return "transient"
    if isinstance(exc, dspy.LMError) and "timed out" in _message(exc).lower():
        return "transient"
    return "deterministic"


def _reshaped(body: str) -> str:
    """A top-level error object (vLLM before 0.7, SGLang) as OpenAI's nested one, so its message is read."""
    try:
        data = json.loads(body)
    except ValueError:
        return body
    if isinstance(data, dict) and "error" not in data and isinstance(data.get("message"), str):
        return json.dumps({"error": {key: data.get(key) for key in ("message", "type", "param", "code")}})
    return body


_installed = False


def install_error_shapes() -> bool:
    """Teach DSPy's native OpenAI-compatible client (once per process) the error shapes it misreads: the top-level
    error object, and a context-length sentence without OpenAI's code, which it would call a plain invalid request
    (so DSPy's own context-window handling never saw it). False when this DSPy has no such client (nothing done)."""
    global _installed
    if _installed:
        return True
    try:
        # Imported by name, not by an import statement: the vendored lm15 ships py.typed, and a static import of it
        # makes mypy analyse the untyped dspy package around it (every dspy attribute then reads as missing).
        errors = importlib.import_module("dspy._vendor.lm15.errors")
        ContextLengthError, InvalidRequestError = errors.ContextLengthError, errors.InvalidRequestError
        OpenAILM = importlib.import_module("dspy._vendor.lm15.providers.openai").OpenAILM
        OpenAIChatLM = importlib.import_module("dspy._vendor.lm15.providers.openai_chat").OpenAIChatLM
    except (ImportError, AttributeError):
        return False
    for cls in (OpenAILM, OpenAIChatLM):
        original = cls.__dict__.get("normalize_error")
        if not callable(original):
            return False

        def normalize_error(self: Any, status: int, body: str, _original: Any = original) -> Any:
            error = _original(self, status, _reshaped(body))
            if isinstance(error, ContextLengthError) or not isinstance(error, InvalidRequestError):
                return error
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
            message = str(getattr(error, "message", "") or error)
            found = read_overflow(message, parsed)
            if found is None:
                return error
            if found.limit is not None and not _first(_LIMIT, message):  # llama-server before b4000: body fields
                message = f"{message} (n_ctx {found.limit}, n_prompt_tokens {found.prompt_tokens})"
            return self._provider_error(
                ContextLengthError, message, status=status, provider_code=getattr(error, "provider_code", None)
            )

        cls.normalize_error = normalize_error
    original_parse = OpenAIChatLM.__dict__.get("parse_response")
    if callable(original_parse):

        def parse_response(self: Any, request: Any, response: Any, _original: Any = original_parse) -> Any:
            parsed = _original(self, request, response)
            if not parsed.text and not parsed.tool_calls:
                raise EmptyReplyError(model=getattr(request, "model", None), provider=getattr(self, "provider", None))
            return parsed

        OpenAIChatLM.parse_response = parse_response
    _installed = True
    return True
