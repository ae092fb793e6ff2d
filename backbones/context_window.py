"""How many tokens one call to a backbone may hold, prompt and output together.

A prompt past the window fails the call (``ContextWindowExceededError``), so the program budgets evidence to fit it.
The window comes from, in order: the backbone's ``context_window``; the embedded engine's ``n_ctx``; an
``openai_compatible`` server's own report (vLLM and SGLang list ``max_model_len`` in ``GET /v1/models``); a hosted
model's ``max_input_tokens`` in LiteLLM's bundled price map. None when nothing says: llama.cpp's server and Ollama do
not report it, so their configs set ``context_window``.
"""

from __future__ import annotations

import os
from typing import Any

import requests

from clearmed.backbones.config import BackboneConfig

__all__ = ["context_window", "served_context_window"]


def served_context_window(
    api_base: str, model: str, *, api_key: str | None = None, timeout: float = 10.0
) -> int | None:
    """``max_model_len`` of ``model`` as the server at ``api_base`` (``.../v1``) lists it; None when the server does
    not report one, or could not be asked (the first real call then says why)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = requests.get(api_base.rstrip("/") + "/models", headers=headers, timeout=timeout)
        listed = response.json().get("data") if response.status_code == 200 else None
    except (requests.RequestException, ValueError, AttributeError):
        return None
    if not isinstance(listed, list):
        return None
    entries = [entry for entry in listed if isinstance(entry, dict)]
    # A server that serves one model under an alias (--served-model-name) lists it under that id only.
    chosen = next((entry for entry in entries if entry.get("id") == model), entries[0] if len(entries) == 1 else None)
    value = chosen.get("max_model_len") if chosen is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def context_window(backbone: BackboneConfig, lm: Any = None, *, timeout: float = 10.0) -> int | None:
    """The backbone's window in tokens (see the module docstring for the order); ``lm`` (the `dspy.LM` built for
    it) is needed only to ask an ``openai_compatible`` server, whose address and key it carries."""
    if backbone.context_window is not None:
        return backbone.context_window
    if backbone.kind == "embedded":
        return backbone.n_ctx
    if backbone.kind == "openai_compatible":
        kwargs = getattr(lm, "kwargs", None) or {}
        api_base = kwargs.get("api_base") or backbone.api_base
        if not api_base:
            return None
        key = kwargs.get("api_key")
        return served_context_window(str(api_base), backbone.model, api_key=str(key) if key else None, timeout=timeout)
    return _mapped_window(backbone.model)


def _mapped_window(model: str) -> int | None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the bundled map only: never fetch it
    try:
        from dspy.clients.model_metadata import model_info
    except ImportError:
        return None
    provider, _, name = model.partition("/")
    value = model_info(provider, name, namespaces=(provider,)).get("max_input_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
