"""`ClearmedLM`: the `dspy.LM` every backbone is built as (`backbones.factory.build_lm`).

DSPy's LM does the calling, caching and history; clearmed does the retrying. On top:

1. **Thinking out of the answer.** Every completion goes through `reasoning.split_thinking` before DSPy's adapter
   parses it. A completion that held ``<think>`` comes back as ``{"text": answer, "reasoning_content": thinking}``,
   the shape DSPy itself returns when a server splits reasoning off; the thinking is also added to the caller's
   `reasoning.collect_thinking()` scopes. ``lm.history`` keeps the raw completion.
2. **Room to think.** For a backbone that thinks (`BackboneConfig.min_output_tokens`), a call's ``max_tokens`` is
   raised to that floor: a stage's small cap would otherwise be spent on the thought and the answer cut off.
3. **Fatal errors stop.** An authentication, billing/quota or missing-model error (`fatal_errors`) is raised as
   `clearmed.core.errors.FatalServiceError`, with the DSPy error as its cause; so is a refused connection or an unknown
   host before the endpoint ever answered (`clearmed.core.endpoints`: a wrong address, not a server restarting).
4. **One failure policy** (`backbones.failures`). Clearmed, not DSPy, retries, through tenacity
   (`clearmed.core.retries.retrying`): a transient failure (a rate limit, a server error, a timeout, a dropped
   connection, a 200 whose body is no reply) is retried ``num_retries`` times with clearmed's backoff and the server's
   hint (`retry_wait.server_hint_s`, each retry counted), then raised as it came; a context overflow is raised at once
   as `failures.ContextOverflowError`, and a window it names is learned for the rest of the run (`context_window`);
   anything else is raised at once.
5. **A deadline per attempt.** A remote backbone's ``timeout`` bounds each attempt in total (`deadlines.bounded_call`),
   not only the wait for the next byte; a second Ctrl-C cuts the attempt and the retries short (`retries.RetriesCut`).
   The attempt runs in the calling thread: DSPy's native transport marks each pooled connection it sends on
   (`native_sockets.guard_native_sockets`), and at the deadline the connection is shut down under the blocked read,
   so no thread or socket outlives its attempt.
6. **No reply is a failed call.** A 200 with no completion (empty ``choices``, a ``null`` or empty message) is a
   transient `failures.EmptyReplyError`, retried and then raised like a 503, never handed to the adapter as an answer.
7. **A cached reply is one endpoint's.** DSPy's cache key leaves ``api_base`` out (`dspy.clients.execution`'s
   ``IGNORED_CACHE_KEYS``), so two servers of one model name shared their replies: a second server, dead or another
   model, was never asked. Each call's key holds its endpoint (`endpoint_cache`), and a reply served from the cache
   marks nothing reached (`clearmed.core.endpoints`: only a server's reply does).

No layer under clearmed retries. Each LM call is one request per attempt of clearmed's policy: DSPy is handed
``num_retries = 0`` (`ClearmedLM.__init__`); DSPy's LiteLLM engine passes ``num_retries = 0`` on to LiteLLM, which
hands it to the openai SDK as ``max_retries`` (its default is 2, each after a backoff sleep); the native lm15 engine
never retries (it reconnects once when a pooled keep-alive connection was stale, before anything was answered);
httpx's transports keep their default of no retries. tests/backbones/test_endpoint_calls.py counts the requests a
server sees, and the connections a closed port sees, on each engine path. The first call DSPy sends through LiteLLM
imports it (seconds of CPU): a bounded attempt's deadline runs from its first socket (`deadlines.bounded_call`), and an
async call imports LiteLLM before its deadline starts (`_ready_engine`), so a short ``timeout`` is the server's alone.
"""

from __future__ import annotations

import asyncio
import importlib
import re
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, NoReturn

import dspy
from dspy.utils.exceptions import LMTimeoutError
from tenacity import Retrying

from clearmed.backbones.config import BackboneConfig, RemoteBackbone
from clearmed.backbones.context_window import Window, resolve_window
from clearmed.backbones.endpoint_cache import CallScope, cache_endpoint, endpoint_scope, install_endpoint_cache_keys
from clearmed.backbones.failures import EmptyReplyError, as_overflow, classify
from clearmed.backbones.fatal_errors import fatal_lm_error
from clearmed.backbones.native_sockets import guard_native_sockets
from clearmed.backbones.reasoning import record_thinking, split_thinking
from clearmed.backbones.retry_wait import LM_SERVICE, server_hint_s
from clearmed.backbones.token_count import ServerTokenCounter, TextCounter, tiktoken_counter
from clearmed.core.deadlines import DeadlineExceeded, bounded_call
from clearmed.core.endpoints import endpoint_of, mark_reached, unreachable_error
from clearmed.core.errors import FatalServiceError
from clearmed.core.retries import (
    RetriesCut,
    pause,
    retries_cut,
    retrying,
    retrying_async,
)

__all__ = ["ClearmedLM", "strip_thinking"]

# A module lock, not an attribute: DSPy copies and pickles LMs, and a lock can be neither.
_WINDOW_LOCK = threading.Lock()
# The address DSPy's native transport names when it cannot connect ("failed to connect to api.openai.com:443: ...").
_CONNECT_TARGET = re.compile(r"failed to connect to (\S+:\d+)")


class ClearmedLM(dspy.LM):
    """`dspy.LM` that strips thinking, leaves a thinking backbone room, retries by clearmed's policy, bounds each
    attempt, learns its window from an overflow, and raises fatal errors as such."""

    def __init__(
        self,
        model: str,
        *,
        service: str = "",
        min_output_tokens: int | None = None,
        backbone: BackboneConfig | None = None,
        num_retries: int = 3,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, num_retries=num_retries, **kwargs)
        # Clearmed retries (`_call`); DSPy makes one attempt each time, so no failure is retried twice over.
        self.max_retries = num_retries
        self.num_retries = 0
        # Names the backbone in a fatal error's one line ("main backbone openai/o3-mini").
        self.service = service or f"LM {model}"
        self.min_output_tokens = min_output_tokens
        self.backbone = backbone
        remote = isinstance(backbone, RemoteBackbone)
        self.deadline_s: float | None = backbone.timeout if isinstance(backbone, RemoteBackbone) else None
        self._bounded = remote
        if remote:
            guard_native_sockets()
        self._window: Window | None = None
        self._learned: int | None = None
        self._counter: TextCounter | None = None
        # The key sets of calls already checked for DSPy's LiteLLM engine (`_ready_engine`).
        self._engine_checked: set[frozenset[str]] = set()
        install_endpoint_cache_keys()
        if backbone is not None and backbone.kind == "openai_compatible" and self.kwargs.get("api_base"):
            key = self.kwargs.get("api_key")
            self._counter = ServerTokenCounter(
                str(self.kwargs["api_base"]), backbone.model, None if key in (None, "none") else str(key)
            )
        elif backbone is not None and backbone.kind == "hosted":
            self._counter = tiktoken_counter(backbone.model)  # None: the estimate, for a tokenizer not known here

    def window(self) -> Window:
        """The window and where it came from (`backbones.context_window`): a limit learned from an overflow wins;
        otherwise looked up on first use (asking a server is a request, and building an LM makes none) and kept,
        unless the server could not be asked, in which case the next use asks again."""
        if self._learned is not None:
            return Window(self._learned, "error", "named by a context-length error")
        if self.backbone is None:
            return Window(None, "unknown", "no backbone config")
        with _WINDOW_LOCK:  # concurrent first stages ask the server once, not once each
            if self._window is None or not self._window.settled:
                self._window = resolve_window(self.backbone, self)
            return self._window

    @property
    def context_window(self) -> int | None:
        """Tokens per call (`window`), None when nothing says."""
        return self.window().tokens

    def learn_window(self, tokens: int) -> None:
        """The server named its window in an error: it holds for the rest of the run (the smallest, if several)."""
        self._learned = tokens if self._learned is None else min(self._learned, tokens)

    def count_tokens(self, text: str) -> int | None:
        """``text``'s tokens as the model counts them (`backbones.token_count`: the server's tokenizer, or a hosted
        OpenAI model's tiktoken encoding), None when nothing here can say."""
        return self._counter.count(text) if self._counter is not None else None

    def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        kwargs = self._room_to_think(kwargs)
        sent = kwargs

        def attempt() -> Any:
            nonlocal sent
            outputs = dspy.LM.__call__(self, prompt, messages=messages, **sent)
            if not _replied(outputs):
                # DSPy's native engine refuses an empty reply before caching it (`failures.install_error_shapes`);
                # one that got here came from a cache that kept it, or an engine that did not: ask the server anew.
                sent = {**kwargs, "cache": False}
                raise EmptyReplyError(model=self.model)
            return outputs

        return strip_thinking(self._call(attempt))

    def _call(self, attempt: Callable[[], Any]) -> Any:
        def once() -> Any:
            with self._cache_scope() as served:
                try:
                    outputs = bounded_call(attempt, self.deadline_s) if self._bounded else attempt()
                except DeadlineExceeded as exc:
                    self._fail(LMTimeoutError(self._no_reply(exc), model=self.model), exc, cached=served.hits > 0)
                except dspy.LMError as exc:
                    self._fail(exc, cached=served.hits > 0)
            if not served.hits:  # a reply from the cache proves nothing about the server
                self._reached()
            return outputs

        return self._policy()(once)

    def _no_reply(self, waited: object) -> str:
        """A timed-out attempt's sentence, naming the endpoint that did not answer (``scheme://host:port``)."""
        endpoint = self._endpoint()
        return f"{waited} from {endpoint_of(endpoint)}" if endpoint else str(waited)

    def _cache_scope(self) -> AbstractContextManager[CallScope]:
        """DSPy's cache keys (and counts the hits of) the calls made inside the block by this LM's endpoint."""
        return endpoint_scope(cache_endpoint(self))

    def _ready_engine(self, prompt: Any, messages: Any, kwargs: dict[str, Any]) -> None:
        """Import LiteLLM before an async call's deadline starts when DSPy will send the call through it.

        DSPy picks its LiteLLM engine, offline, for a request its native engine cannot carry (``chat_template_kwargs``
        in a config's ``extra``: the packaged vLLM config), and imports LiteLLM inside the call: seconds of CPU, which
        a short ``timeout`` spent before the request went out (issue 58). A sync attempt's deadline runs from its
        first socket (`deadlines.bounded_call`); an async one's is ``asyncio.wait_for`` around the whole call."""
        if not self._bounded or "litellm" in sys.modules:
            return
        shape = frozenset(kwargs)
        if shape in self._engine_checked:
            return
        self._engine_checked.add(shape)
        if self.sends_through_litellm(prompt, messages, kwargs):
            try:
                importlib.import_module("dspy.clients._litellm").get_litellm(feature="dspy.LM")
            except Exception:  # a best effort: the call itself raises what is wrong, within its deadline
                return

    def sends_through_litellm(
        self, prompt: Any = None, messages: Any = None, kwargs: dict[str, Any] | None = None
    ) -> bool | None:
        """Whether DSPy sends this call (by default a plain chat call) through its LiteLLM engine rather than its
        native one (lm15), by DSPy's own offline choice of engine (no I/O: `dspy.clients.execution._select_engine`);
        None when that choice cannot be read (a private function, looked up by name: unreadable is unknown, never a
        guess). `_ready_engine` imports LiteLLM before such a call's deadline; a batch run, which answers calls at the
        native engine's transport (`batch_calls`), refuses a backbone whose calls would bypass it."""
        if messages is None and prompt is None:
            messages = [{"role": "user", "content": "?"}]
        try:
            execution = importlib.import_module("dspy.clients.execution")
            call = execution.prepare(self, prompt, messages, kwargs or {})
            return isinstance(execution._engine(self, call, False)[0], execution.LiteLLMEngine)
        except Exception:
            return None

    def _policy(self) -> Retrying:
        return retrying(
            LM_SERVICE,
            self.max_retries,
            transient=_transient,
            hint=server_hint_s,
            sleep=lambda seconds: pause(seconds),  # looked up at each wait: tests replace it
        )

    def _fail(self, error: BaseException, cause: BaseException | None = None, *, cached: bool = False) -> NoReturn:
        """Raise what a failed attempt means by the policy: a fatal error (a refusal no retry mends, or an endpoint
        never reached refusing the connection) or an overflow as such, never retried; anything else as it came (retried
        when `classify` calls it transient). ``cause``: what the attempt itself raised when its deadline passed (a
        refused connection past the deadline is still a refusal); ``cached``: the failure came from the cache."""
        fatal = (
            fatal_lm_error(error, self.service, secret=self.kwargs.get("api_key"))
            or self._unreachable(error)
            or (self._unreachable(cause) if cause is not None else None)
        )
        if fatal is not None:
            raise fatal from error
        if getattr(error, "status", None) is not None and not cached:
            self._reached()  # an HTTP error: the endpoint answered
        overflow = as_overflow(error) if classify(error) == "overflow" else None
        if overflow is not None:
            if overflow.limit is not None:
                self.learn_window(overflow.limit)
            raise overflow from error
        self._name_endpoint(error)
        if cause is None:
            raise error
        raise error from cause

    def _name_endpoint(self, error: BaseException) -> None:
        """A transient failure's text names the endpoint it came from (``(from scheme://host:port)``), so the step a
        failure degrades records where, and a run's degraded line and summary name it (issue 58: a server that
        accepted and never answered was named by model and stage only)."""
        endpoint = self._endpoint(error)
        if not endpoint or not isinstance(error, dspy.LMError) or classify(error) != "transient":
            return
        where = endpoint_of(endpoint)
        said = str(error.args[0]) if error.args else ""
        if where not in said:
            error.args = (f"{said} (from {where})", *error.args[1:])

    def _endpoint(self, error: BaseException | None = None) -> str | None:
        """The address the LM calls: its ``api_base``, else the host and port a transport error names (a hosted
        provider's default address); None for the embedded engine."""
        base = self.kwargs.get("api_base")
        if base:
            return str(base)
        named = _CONNECT_TARGET.search(str(error)) if error is not None else None
        return f"https://{named.group(1)}" if named else None

    def _unreachable(self, error: BaseException) -> FatalServiceError | None:
        endpoint = self._endpoint(error)
        return unreachable_error(self.service, endpoint, error) if endpoint else None

    def _reached(self) -> None:
        endpoint = self._endpoint()
        if endpoint:
            mark_reached(endpoint)

    async def acall(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        kwargs = self._room_to_think(kwargs)
        self._ready_engine(prompt, messages, kwargs)

        async def once() -> Any:
            if retries_cut():
                raise RetriesCut("retries cut short")
            with self._cache_scope() as served:
                try:
                    outputs = await asyncio.wait_for(
                        dspy.LM.acall(self, prompt, messages=messages, **kwargs), self.deadline_s
                    )
                except TimeoutError as exc:
                    waited = f"no complete reply within {self.deadline_s:g} s"
                    self._fail(LMTimeoutError(self._no_reply(waited), model=self.model), exc, cached=served.hits > 0)
                except dspy.LMError as exc:
                    self._fail(exc, cached=served.hits > 0)
            if not served.hits:
                self._reached()
            if not _replied(outputs):
                raise EmptyReplyError(model=self.model)
            return strip_thinking(outputs)

        policy = retrying_async(LM_SERVICE, self.max_retries, transient=_transient, hint=server_hint_s)
        return await policy(once)

    def _room_to_think(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        floor = self.min_output_tokens
        asked = kwargs.get("max_tokens")
        if floor is None or not isinstance(asked, int) or asked >= floor:
            return kwargs
        return {**kwargs, "max_tokens": floor}


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, dspy.LMError) and classify(exc) == "transient"


def _replied(outputs: Any) -> bool:
    """Whether DSPy's outputs hold a reply: some completion with text or tool calls (anything but a list is typed)."""
    if not isinstance(outputs, list):
        return True
    return any(
        bool(output.get("text") or output.get("tool_calls")) if isinstance(output, dict) else bool(output)
        for output in outputs
    )


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
