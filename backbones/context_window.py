"""How many tokens one call to a backbone may hold, prompt and output together, and where that number came from.

A prompt past the window fails the call (``ContextWindowExceededError``), so the program fits evidence to it
(`programs.lm.prompting`). The window comes from, in order:

- ``config``: the backbone's ``context_window``;
- ``engine``: the embedded engine's ``n_ctx``;
- ``server``: an ``openai_compatible`` server's own report: ``max_model_len`` in ``GET /v1/models`` (vLLM, SGLang),
  else ``default_generation_settings.n_ctx`` in ``GET /props`` (llama.cpp's llama-server; its ``/v1/models`` lists
  ``meta.n_ctx_train``, the model's training length, which is not the window it serves, so that is never read);
- ``map``: a hosted model's ``max_input_tokens`` in LiteLLM's bundled price map;
- ``error``: learned from a context-length error that named it (`backbones.failures`), for the rest of the run;
- ``unknown``: nothing said. llama-cpp-python's server (``python -m llama_cpp.server``) reports no window at all
  (its ``/v1/models`` lists ids only, and it has no ``/props``), nor does Ollama; the first overflow teaches it.

A server that could not be asked (down, or still throttling after the retries) leaves the window unsettled, so the
next call asks again rather than running the whole run without a window. Throttled probes are retried with clearmed's
backoff and counted like any LM retry.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Final, Literal

from clearmed.backbones.config import BackboneConfig, EmbeddedBackbone, RemoteBackbone
from clearmed.core.http import NoReply, request

__all__ = [
    "Window",
    "WindowSource",
    "context_window",
    "resolve_window",
    "served_context_window",
    "served_window",
    "server_root",
]

WindowSource = Literal["config", "engine", "server", "map", "error", "unknown"]
# Probes of a throttled server: retried this many times, like a call with the default num_retries.
_PROBE_RETRIES: Final = 3
# A 500 is not among them: a server without the endpoint may answer one, and asking again would not change that.
_RETRIED_STATUS: Final = frozenset({408, 429, 502, 503, 504})


@dataclass(frozen=True)
class Window:
    """A window in tokens (None: not known), its source, what said it (``detail``), and whether the answer is final
    (``settled``: False when the server could not be asked, so it is asked again)."""

    tokens: int | None
    source: WindowSource
    detail: str = ""
    settled: bool = True


class Unreachable(Exception):
    """The server could not be asked (refused, timed out, or still throttling after the retries)."""


def server_root(api_base: str) -> str:
    """The server's own root (``http://host:8000``) for an ``.../v1`` base: where ``/props`` and ``/tokenize`` live."""
    base = api_base.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def request_json(
    method: str, url: str, *, api_key: str | None, timeout: float, body: dict[str, Any] | None = None
) -> tuple[int, Any]:
    """(status, parsed body or None) of one request, a throttled or failing server retried with clearmed's backoff
    (each retry counted as an LM retry: `clearmed.core.http.request`); `Unreachable` when no answer came. A probe never
    stops a run: the call it serves says whether the server is there."""
    try:
        reply = request(
            method,
            url,
            api_key=api_key,
            timeout=timeout,
            body=body,
            retries=_PROBE_RETRIES,
            retried=_RETRIED_STATUS,
            retry_no_reply=False,  # a server that is not there now is asked again at the next call
        )
    except NoReply as failed:
        raise Unreachable(failed.why) from None
    if reply.status in _RETRIED_STATUS:
        raise Unreachable(f"HTTP {reply.status}")
    return reply.status, reply.payload


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _listed(payload: Any, model: str) -> int | None:
    listed = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(listed, list):
        return None
    entries = [entry for entry in listed if isinstance(entry, dict)]
    # A server that serves one model under an alias (--served-model-name) lists it under that id only.
    chosen = next((entry for entry in entries if entry.get("id") == model), entries[0] if len(entries) == 1 else None)
    return _positive(chosen.get("max_model_len")) if chosen is not None else None


def _props(payload: Any) -> int | None:
    settings = payload.get("default_generation_settings") if isinstance(payload, dict) else None
    return _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None


def served_window(api_base: str, model: str, *, api_key: str | None = None, timeout: float = 10.0) -> Window:
    """The window of ``model`` as the server at ``api_base`` (``.../v1``) reports it: ``/v1/models`` first, then
    ``/props``; ``unknown`` (settled) when it reports none, unsettled when it could not be asked."""
    try:
        status, payload = request_json("GET", api_base.rstrip("/") + "/models", api_key=api_key, timeout=timeout)
        if status == 200 and (tokens := _listed(payload, model)) is not None:
            return Window(tokens, "server", "GET /v1/models max_model_len")
        status, payload = request_json("GET", server_root(api_base) + "/props", api_key=api_key, timeout=timeout)
        if status == 200 and (tokens := _props(payload)) is not None:
            return Window(tokens, "server", "GET /props n_ctx")
    except Unreachable as why:
        return Window(None, "unknown", f"the server could not be asked ({why})", settled=False)
    return Window(None, "unknown", "the server does not report it")


def served_context_window(
    api_base: str, model: str, *, api_key: str | None = None, timeout: float = 10.0
) -> int | None:
    """The served window in tokens, or None (see `served_window`)."""
    return served_window(api_base, model, api_key=api_key, timeout=timeout).tokens


def resolve_window(
    backbone: BackboneConfig, lm: Any = None, *, timeout: float = 10.0, api_key: str | None = None
) -> Window:
    """The backbone's window and its source (see the module docstring for the order); ``lm`` (the `dspy.LM` built for
    it) is needed only to ask an ``openai_compatible`` server, whose address and key it carries (or pass ``api_key``)."""
    if isinstance(backbone, EmbeddedBackbone):
        return Window(backbone.n_ctx, "engine", "n_ctx")
    if not isinstance(backbone, RemoteBackbone):
        return Window(None, "unknown", f"no window for a {type(backbone).__name__}")
    if backbone.context_window is not None:
        return Window(backbone.context_window, "config", "context_window")
    if backbone.kind == "openai_compatible":
        kwargs = getattr(lm, "kwargs", None) or {}
        api_base = kwargs.get("api_base") or backbone.api_base
        if not api_base:
            return Window(None, "unknown", "no api_base")
        key = kwargs.get("api_key") or api_key
        key = str(key) if key and key != "none" else None
        return served_window(str(api_base), backbone.model, api_key=key, timeout=timeout)
    tokens = _mapped_window(backbone.model)
    return Window(tokens, "map", "LiteLLM's model map") if tokens else Window(None, "unknown", "not in LiteLLM's map")


def context_window(backbone: BackboneConfig, lm: Any = None, *, timeout: float = 10.0) -> int | None:
    """The backbone's window in tokens, or None when nothing says (`resolve_window`)."""
    return resolve_window(backbone, lm, timeout=timeout).tokens


def _mapped_window(model: str) -> int | None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the bundled map only: never fetch it
    try:
        from dspy.clients.model_metadata import model_info
    except ImportError:
        return None
    provider, _, name = model.partition("/")
    return _positive(model_info(provider, name, namespaces=(provider,)).get("max_input_tokens"))
