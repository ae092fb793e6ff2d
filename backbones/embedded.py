"""`LlamaCppEngine`: a DSPy 3.4 engine that answers with a llama.cpp model in this process.

DSPy owns caching, retries, history and ``n``; the engine turns one `dspy.lm15.Request` into one
`dspy.lm15.Response`. Use it as ``dspy.LM("local/<name>", engine=eng, async_engine=AsyncLlamaCppEngine(eng))``
(see `clearmed.backbones.factory.build_lm`).

Calls to one model are serialized (``Llama`` is not thread-safe), so callers gain nothing from threads here:
`serializes_calls` tells the program to run pathways in sequence, ordered for prompt-prefix reuse.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from dspy import lm15
from dspy.lm15 import Message, Request, Response, TextPart, Usage

from clearmed.backbones.config import EmbeddedBackbone
from clearmed.backbones.llama_runtime import (
    ChatMessage,
    LlamaLike,
    LlamaLoadArgs,
    LlamaLoader,
    SharedModel,
    get_shared_model,
    load_llama,
)
from clearmed.backbones.logprobs import NextTokenScores, ScoringError, candidate_logprobs, log_softmax, spellings

__all__ = ["AsyncLlamaCppEngine", "EngineStats", "LlamaCppEngine"]

_PROVIDER: Final = "llama.cpp"
# lm15 "developer" turns are system instructions to a local chat template.
_ROLES: Final = {"user": "user", "assistant": "assistant", "developer": "system"}
_FINISH_REASONS: Final = {"stop": "stop", "length": "length", "tool_calls": "tool_call"}


@dataclass(frozen=True)
class EngineStats:
    """Work done by one engine since creation (or `LlamaCppEngine.reset_stats`)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def add(self, prompt_tokens: int, completion_tokens: int, seconds: float) -> EngineStats:
        return EngineStats(
            calls=self.calls + 1,
            prompt_tokens=self.prompt_tokens + prompt_tokens,
            completion_tokens=self.completion_tokens + completion_tokens,
            seconds=self.seconds + seconds,
        )


class LlamaCppEngine:
    """Synchronous engine over a shared, lazily loaded llama.cpp model."""

    # Read by `clearmed.backbones.factory.supports_concurrency`: calls queue on one lock.
    serializes_calls: Final = True

    def __init__(
        self,
        load_args: LlamaLoadArgs,
        *,
        model_name: str = "local",
        loader: LlamaLoader = load_llama,
    ) -> None:
        self.load_args = load_args
        self.model_name = model_name
        self._loader = loader
        self._stats = EngineStats()
        self._stats_lock = threading.Lock()

    @classmethod
    def from_config(cls, cfg: EmbeddedBackbone, model_path: str, *, loader: LlamaLoader = load_llama) -> LlamaCppEngine:
        """Engine for an `EmbeddedBackbone` whose GGUF has been resolved to ``model_path``."""
        args = LlamaLoadArgs(
            model_path=model_path,
            n_ctx=cfg.n_ctx,
            n_batch=cfg.n_batch,
            n_threads=cfg.threads,
            seed=cfg.seed,
            prompt_cache_mb=cfg.prompt_cache_mb,
        )
        return cls(args, model_name=cfg.model, loader=loader)

    # -- DSPy engine contract ------------------------------------------------------------------------------

    def complete(self, request: Request) -> Response:
        if request.tools:
            raise lm15.UnsupportedFeatureError(
                "the embedded llama.cpp backbone does not support tool calls",
                feature="tools",
                provider=_PROVIDER,
            )
        messages = chat_messages(request)
        config = request.config
        options = self._sampling_options(request)
        shared = self.load()
        with shared.lock:
            prompt_tokens = shared.count_tokens(messages)
            self._check_context(prompt_tokens, config.max_tokens)
            started = time.perf_counter()
            try:
                result = shared.llm.create_chat_completion(messages=messages, **options)
            except ValueError as exc:
                if "context window" in str(exc):  # llama.cpp's own guard, if our count was short
                    raise self._overflow(prompt_tokens, config.max_tokens) from None
                raise
            elapsed = time.perf_counter() - started
        return self._response(result, prompt_tokens, elapsed)

    def score_next_token(
        self, messages: Sequence[ChatMessage], assistant_prefix: str, candidates: Sequence[str]
    ) -> NextTokenScores:
        """Log-probabilities of each candidate as the next token after the chat and ``assistant_prefix``.

        One forward pass over the prompt's new tokens (the shared KV prefix is reused), no sampling: see
        `clearmed.backbones.logprobs`. Each candidate sums its `spellings` that are one token ("Yes", " yes" ...);
        a spelling the tokenizer splits is left out, since its first piece ("Y", a bare space) is not the word.
        """
        shared = self.load()
        if shared.render_prompt is None or shared.next_logits is None:
            raise ScoringError("this model has no chat template to score against")
        prompt, add_bos = shared.render_prompt(messages)
        with shared.lock:
            tokens = shared.llm.tokenize((prompt + assistant_prefix).encode("utf-8"), add_bos=add_bos, special=True)
            self._check_context(len(tokens), 1)
            started = time.perf_counter()
            logits = shared.next_logits(tokens)
            elapsed = time.perf_counter() - started
            variants = {c: _single_tokens(shared.llm, spellings(c)) for c in candidates}
        if missing := [c for c, ids in variants.items() if not ids]:
            raise ScoringError(
                f"no spelling of {', '.join(map(repr, missing))} is one token in this model's vocabulary"
            )
        with self._stats_lock:
            self._stats = self._stats.add(len(tokens), 0, elapsed)
        return NextTokenScores(
            logprobs=candidate_logprobs(log_softmax(logits), variants), prompt_tokens=len(tokens), seconds=elapsed
        )

    def close(self) -> None:
        """Nothing to release per engine: the model is shared (see `llama_runtime.unload_models`)."""

    # DSPy's optimizers deep-copy modules and their LMs; a copy must not duplicate a 2 GB model.
    def __deepcopy__(self, memo: dict[int, Any]) -> LlamaCppEngine:
        return self

    def __copy__(self) -> LlamaCppEngine:
        return self

    # Lets a program saved with this LM restore it (loading needs allow_unsafe_lm_state=True).
    def dump_state(self) -> dict[str, Any]:
        return {"load_args": self.load_args.model_dump(), "model_name": self.model_name}

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> LlamaCppEngine:
        return cls(LlamaLoadArgs.model_validate(state["load_args"]), model_name=state["model_name"])

    # -- public helpers ------------------------------------------------------------------------------------

    def load(self) -> SharedModel:
        """Load (or fetch) the shared model now; `complete` does this on first use."""
        return get_shared_model(self.load_args, self._loader)

    @property
    def stats(self) -> EngineStats:
        return self._stats

    def reset_stats(self) -> None:
        with self._stats_lock:
            self._stats = EngineStats()

    def __repr__(self) -> str:
        return f"LlamaCppEngine(model={self.model_name!r}, path={self.load_args.model_path!r})"

    # -- internals -----------------------------------------------------------------------------------------

    def _sampling_options(self, request: Request) -> dict[str, Any]:
        config = request.config
        options: dict[str, Any] = {
            "seed": config.seed if config.seed is not None else self.load_args.seed,
            "stop": list(config.stop),
            "max_tokens": config.max_tokens,
        }
        # Unset values keep llama.cpp's defaults rather than inventing ours.
        for name in ("temperature", "top_p", "top_k", "presence_penalty", "frequency_penalty"):
            value = getattr(config, name)
            if value is not None:
                options[name] = value
        response_format = _llama_response_format(config.response_format)
        if response_format is not None:
            options["response_format"] = response_format
        return options

    def _check_context(self, prompt_tokens: int, max_tokens: int | None) -> None:
        # Fail before llama.cpp: a prompt that leaves no room for max_tokens would otherwise be answered with
        # a silently truncated completion, which DSPy then reports as a parse failure.
        needed = prompt_tokens + (max_tokens or 1)
        if needed > self.load_args.n_ctx:
            raise self._overflow(prompt_tokens, max_tokens)

    def _overflow(self, prompt_tokens: int, max_tokens: int | None) -> lm15.ContextLengthError:
        return lm15.ContextLengthError(
            f"prompt of {prompt_tokens} tokens + max_tokens {max_tokens or 0} exceeds the embedded model's "
            f"context window n_ctx={self.load_args.n_ctx}: shorten the prompt (fewer or shorter passages) "
            "or raise n_ctx",
            provider=_PROVIDER,
        )

    def _response(self, result: Any, counted_prompt_tokens: int, elapsed: float) -> Response:
        # No choice, or a null message: an empty text, which `client.ClearmedLM` refuses (retried like a 503).
        choice = (result.get("choices") or [{}])[0]
        text = (choice.get("message") or {}).get("content") or ""
        usage = result.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens", counted_prompt_tokens))
        completion_tokens = int(usage.get("completion_tokens", 0))
        with self._stats_lock:
            self._stats = self._stats.add(prompt_tokens, completion_tokens, elapsed)
        return Response(
            id=result.get("id"),
            model=self.model_name,
            message=Message.assistant([TextPart(text)]),
            finish_reason=_FINISH_REASONS.get(choice.get("finish_reason") or "stop", "stop"),
            usage=Usage(
                input_tokens=prompt_tokens,
                output_tokens=completion_tokens,
                total_tokens=prompt_tokens + completion_tokens,
            ),
        )


class AsyncLlamaCppEngine:
    """Async twin: runs the sync engine in a worker thread so the event loop stays responsive."""

    serializes_calls: Final = True

    def __init__(self, sync: LlamaCppEngine) -> None:
        self.sync = sync

    async def complete(self, request: Request) -> Response:
        return await asyncio.to_thread(self.sync.complete, request)

    async def aclose(self) -> None:
        self.sync.close()

    def close(self) -> None:
        self.sync.close()

    def __deepcopy__(self, memo: dict[int, Any]) -> AsyncLlamaCppEngine:
        return self

    def __copy__(self) -> AsyncLlamaCppEngine:
        return self

    def dump_state(self) -> dict[str, Any]:
        return self.sync.dump_state()

    @classmethod
    def load_state(cls, state: dict[str, Any]) -> AsyncLlamaCppEngine:
        return cls(LlamaCppEngine.load_state(state))


def chat_messages(request: Request) -> list[ChatMessage]:
    """The request as llama.cpp chat messages: the system prompt first, then the turns in order."""
    messages: list[ChatMessage] = []
    system = request.system
    if system is not None:
        text = system if isinstance(system, str) else "".join(getattr(p, "text", "") or "" for p in system)
        messages.append({"role": "system", "content": text})
    for message in request.messages:
        role = _ROLES.get(message.role)
        if role is None or any(not isinstance(part, TextPart) for part in message.parts):
            raise lm15.UnsupportedFeatureError(
                f"the embedded backbone sends text only; got a {message.role!r} message with "
                f"{', '.join(sorted({type(p).__name__ for p in message.parts}))}",
                feature="content",
                provider=_PROVIDER,
            )
        messages.append({"role": role, "content": message.text or ""})
    return messages


def _single_tokens(llm: LlamaLike, texts: Sequence[str]) -> list[int]:
    """The token ids of those ``texts`` that are one token each."""
    ids = (llm.tokenize(text.encode("utf-8"), add_bos=False) for text in texts)
    return [tokens[0] for tokens in ids if len(tokens) == 1]


def _llama_response_format(response_format: Any) -> dict[str, Any] | None:
    """lm15 response_format -> llama.cpp's (a JSON grammar, optionally constrained by a schema)."""
    if not isinstance(response_format, dict):
        return None
    kind = response_format.get("type")
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":  # lm15's canonical shape: {"type": "json_schema", "schema": {...}}
        schema = response_format.get("schema")
        return {"type": "json_object", "schema": schema} if schema else {"type": "json_object"}
    return None
