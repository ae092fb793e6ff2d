"""Loading llama.cpp models once per process and sharing them.

A 1.5B GGUF takes ~2 GB of RAM. Several roles (main, assessor, judge...) may name the same model, and DSPy's
optimizers copy LMs freely, so every engine asks this registry for a `SharedModel` keyed by its load
arguments: one `Llama` per distinct (file, context, threads, ...) and one lock per `Llama`, because a
`Llama` object is not thread-safe.

``llama_cpp`` is imported only when a model is actually loaded: it is an optional extra.

Reproducibility: llama.cpp reuses the KV state of a shared prompt prefix (from the previous call, and from
the RAM prompt cache). A reused prefix was evaluated in different batch splits than a fresh one, so even at
temperature 0 an uncertain model can answer differently depending on which calls came before (measured:
the 1.5B model's one-word answer differed in 7 of 10 "back to an earlier prompt" trials, RAM cache on vs
off). Same call order, same answers.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "EMBEDDED_EXTRA_MESSAGE",
    "ChatMessage",
    "LlamaLike",
    "LlamaLoadArgs",
    "LlamaLoader",
    "SharedModel",
    "get_shared_model",
    "llama_cpp_available",
    "load_llama",
    "loaded_models",
    "unload_models",
]

log = logging.getLogger(__name__)

EMBEDDED_EXTRA_MESSAGE: Final = (
    "the embedded backbone needs llama-cpp-python: pip install 'clearmed[embedded]' "
    "(or configure an openai_compatible or hosted backbone)"
)

ChatMessage = dict[str, str]

# A cached prompt state is restored only when it saves at least this many tokens of evaluation.
MIN_RESTORE_GAIN: Final = 64

# Chat-template framing per message (<|im_start|>role\n ... <|im_end|>\n) when no template is available.
_FALLBACK_TOKENS_PER_MESSAGE: Final = 8


class LlamaLike(Protocol):
    """The part of ``llama_cpp.Llama`` the engine uses (tests inject a fake with the same shape)."""

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]: ...

    def create_chat_completion(self, **kwargs: Any) -> Any: ...


class LlamaLoadArgs(BaseModel):
    """Everything that makes two loaded models different; the registry key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_path: str
    n_ctx: int = Field(ge=1)
    n_batch: int = Field(default=512, ge=1)
    n_threads: int = Field(ge=1)
    flash_attn: bool = True
    seed: int = 0
    prompt_cache_mb: int = Field(default=512, ge=0)


# A chat rendered as the model's template renders it: the prompt text, and whether a BOS token must be added.
RenderedPrompt = tuple[str, bool]


@dataclass
class SharedModel:
    """One loaded model, its lock, and how to count a chat prompt's tokens exactly as it will be sent.

    ``render_prompt`` and ``next_logits`` serve option scoring (`LlamaCppEngine.score_next_token`): the chat
    as the template renders it, and the next-token logits after a token sequence (reusing the KV prefix).
    """

    llm: LlamaLike
    args: LlamaLoadArgs
    count_tokens: Callable[[Sequence[ChatMessage]], int]
    load_seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    render_prompt: Callable[[Sequence[ChatMessage]], RenderedPrompt] | None = None
    next_logits: Callable[[Sequence[int]], np.ndarray] | None = None


LlamaLoader = Callable[[LlamaLoadArgs], SharedModel]

_registry: dict[LlamaLoadArgs, SharedModel] = {}
_registry_lock = threading.Lock()


def llama_cpp_available() -> bool:
    """Whether ``llama_cpp`` is importable, without importing it (that costs a second)."""
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError:
        # An ImportError passes through DSPy's error boundary unchanged, message intact.
        raise ImportError(EMBEDDED_EXTRA_MESSAGE) from None
    return llama_cpp


def load_llama(args: LlamaLoadArgs) -> SharedModel:
    """Load a GGUF with llama.cpp using the arguments measured in design/backbone.md."""
    llama_cpp = _import_llama_cpp()
    started = time.perf_counter()
    try:
        llm = llama_cpp.Llama(
            model_path=args.model_path,
            n_ctx=args.n_ctx,
            n_batch=args.n_batch,
            n_threads=args.n_threads,
            n_threads_batch=args.n_threads,
            flash_attn=args.flash_attn,
            seed=args.seed,
            verbose=False,
        )
    except (ValueError, RuntimeError) as exc:
        raise RuntimeError(f"llama.cpp could not load {args.model_path}: {exc}") from None
    if args.prompt_cache_mb > 0:
        # Keeps KV states of recent prompts so a call can resume from the longest cached prefix, not only
        # from the previous call's (llama.cpp's built-in reuse); predictors alternate, each with its own
        # long system prompt (instructions + demos).
        llm.set_cache(_prompt_state_cache(llama_cpp, args.prompt_cache_mb * 1024 * 1024, lambda: llm._input_ids))
        llm.save_state = functools.partial(_lean_save_state, llama_cpp, llm)
    seconds = time.perf_counter() - started
    log.info("loaded %s in %.1f s (n_ctx=%d, threads=%d)", args.model_path, seconds, args.n_ctx, args.n_threads)
    render = _template_renderer(llama_cpp, llm)
    return SharedModel(
        llm=llm,
        args=args,
        count_tokens=_template_counter(llm, render) if render else fallback_token_counter(llm),
        load_seconds=seconds,
        render_prompt=render,
        next_logits=functools.partial(_next_logits, llm),
    )


def _next_logits(llm: Any, tokens: Sequence[int]) -> np.ndarray:
    """Logits of the token after ``tokens``: one forward pass over what the KV cache does not hold yet.

    Mirrors ``Llama.generate``'s prefix reuse (and the RAM prompt cache), so scoring the local and dynamic
    prompts after each other costs only their differing tails. At least one token is evaluated: the logits
    of the last one are what we read.
    """
    if not tokens:
        raise ValueError("cannot score an empty prompt")
    cache = getattr(llm, "cache", None)
    if cache is not None:
        with contextlib.suppress(KeyError):  # no cached state worth restoring
            llm.load_state(cache[tokens])
    reuse = min(common_prefix_length(llm._input_ids, tokens), len(tokens) - 1)
    llm.n_tokens = reuse
    llm.eval(tokens[reuse:])
    logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),)).copy()
    if cache is not None:
        cache[tokens] = llm.save_state()
    return logits


def _prompt_state_cache(llama_cpp: Any, capacity_bytes: int, live_tokens: Callable[[], Sequence[int]]) -> Any:
    """``LlamaRAMCache`` that stores only what resuming a prompt needs, and restores only when it pays.

    - ``Llama.save_state`` also copies the logits buffer (n_batch x vocab floats: 311 MB for Qwen2.5 at
      n_batch 512) that the sampler no longer reads, and ``LlamaRAMCache`` leaves it out of its capacity
      accounting, so a "512 MB" cache grew by ~350 MB per saved prompt. One row is kept (see
      `_lean_save_state`, which avoids the copy in the first place): ``load_state`` broadcasts it back.
    - llama.cpp restores a cached state whenever its prefix is longer than the live one, even by one token
      (every prompt starts with the same chat-template header). Restoring costs ~1 s, re-evaluating
      `MIN_RESTORE_GAIN` tokens about as much, so shorter gains are reported as a miss.
    """

    class PromptStateCache(llama_cpp.LlamaRAMCache):
        def __setitem__(self, key: Sequence[int], value: Any) -> None:
            if getattr(value, "scores", None) is not None and len(value.scores) > 1:
                value.scores = value.scores[:1].copy()
            super().__setitem__(key, value)

        def __getitem__(self, key: Sequence[int]) -> Any:
            value = super().__getitem__(key)
            # input_ids is the whole n_ctx buffer; only the first n_tokens are this state's prompt.
            cached = common_prefix_length(value.input_ids[: value.n_tokens], key)
            gain = cached - common_prefix_length(live_tokens(), key)
            if gain < MIN_RESTORE_GAIN:
                raise KeyError("cached prefix too short to be worth restoring")
            return value

    return PromptStateCache(capacity_bytes=capacity_bytes)


def _lean_save_state(llama_cpp: Any, llm: Any) -> Any:
    """``Llama.save_state`` (llama-cpp-python 0.3.36) without its copy of the logits buffer.

    The stock method copies n_batch x vocab floats (311 MB for Qwen2.5) on every call the RAM cache makes;
    measured 0.63 s of its 0.71 s, page faults included, for a buffer nothing reads (sampling happens in
    llama.cpp; the rows matter only for logprobs, which need logits_all). One row keeps ``load_state``'s
    broadcast working. Falls back to the stock method if the pinned internals ever change.
    """
    try:
        ctx = llm._ctx.ctx
        size = int(llama_cpp.llama_state_get_size(ctx))
        buffer = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_get_data(ctx, buffer, size))
        if written > size:
            raise RuntimeError("Failed to copy llama state data")
        return llama_cpp.llama.LlamaState(
            input_ids=llm.input_ids.copy(),
            scores=llm.scores[:1].copy(),
            n_tokens=llm.n_tokens,
            llama_state=ctypes.string_at(buffer, written),
            llama_state_size=written,
            seed=llm._seed,
        )
    except AttributeError:
        return type(llm).save_state(llm)


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    mismatch = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(mismatch[0]) if mismatch.size else n


def _template_renderer(llama_cpp: Any, llm: Any) -> Callable[[Sequence[ChatMessage]], RenderedPrompt] | None:
    """Render a chat through the model's own template, as create_chat_completion will; None without one."""
    template = llm.metadata.get("tokenizer.chat_template")
    if not template:
        return None

    def token_text(token_id: int) -> str:
        return llm._model.token_get_text(token_id) if token_id != -1 else ""

    formatter = llama_cpp.llama_chat_format.Jinja2ChatFormatter(
        template=template, eos_token=token_text(llm.token_eos()), bos_token=token_text(llm.token_bos())
    )

    def render(messages: Sequence[ChatMessage]) -> RenderedPrompt:
        result = formatter(messages=list(messages))
        return result.prompt, not result.added_special

    return render


def _template_counter(
    llm: Any, render: Callable[[Sequence[ChatMessage]], RenderedPrompt]
) -> Callable[[Sequence[ChatMessage]], int]:
    """Count tokens through the model's own chat template, as create_chat_completion will format them."""

    def count(messages: Sequence[ChatMessage]) -> int:
        prompt, add_bos = render(messages)
        return len(llm.tokenize(prompt.encode("utf-8"), add_bos=add_bos, special=True))

    return count


def fallback_token_counter(llm: LlamaLike) -> Callable[[Sequence[ChatMessage]], int]:
    """Content tokens plus a fixed framing allowance per message (for models without a chat template)."""

    def count(messages: Sequence[ChatMessage]) -> int:
        content = sum(len(llm.tokenize(m["content"].encode("utf-8"), add_bos=False)) for m in messages)
        return content + _FALLBACK_TOKENS_PER_MESSAGE * (len(messages) + 1)

    return count


def get_shared_model(args: LlamaLoadArgs, loader: LlamaLoader = load_llama) -> SharedModel:
    """The process-wide model for ``args``, loading it on first use (once, even under threads)."""
    with _registry_lock:
        shared = _registry.get(args)
        if shared is None:
            shared = loader(args)
            _registry[args] = shared
        return shared


def loaded_models() -> list[LlamaLoadArgs]:
    """Load arguments of every model currently held (for diagnostics and tests)."""
    with _registry_lock:
        return list(_registry)


def unload_models() -> None:
    """Free every shared model (engines reload lazily if called again)."""
    with _registry_lock:
        models = list(_registry.values())
        _registry.clear()
    for shared in models:
        with shared.lock:
            close = getattr(shared.llm, "close", None)
            if callable(close):
                close()
