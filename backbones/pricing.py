"""What a backbone's tokens cost in US dollars.

Hosted models are priced from LiteLLM's model price map as DSPy 3.4 bundles it (``dspy.clients.model_metadata``, a
snapshot of ``model_prices_and_context_window.json``); `LITELLM_LOCAL_MODEL_COST_MAP` is set first, so the bundled copy
is read and nothing is fetched. A backbone's own ``price`` wins over the map (a negotiated rate, a model the map
lacks); self-hosted backbones (``openai_compatible``, ``embedded``) cost their ``price``, 0 by default. A hosted model
the map does not know has no price: `cost_usd` says None, never a made-up 0.
"""

from __future__ import annotations

import os

from clearmed.backbones.config import BackboneConfig, RemoteBackbone, TokenPrice

__all__ = ["BATCH_DISCOUNT", "batch_price_of", "cost_usd", "price_of"]

_PER_MILLION = 1_000_000
# What a provider's batch API charges of its synchronous price when the price map names no batch price of its own
# (OpenAI's Batch API and Anthropic's Message Batches: 50% off, both providers' pricing pages).
BATCH_DISCOUNT = 0.5


def price_of(backbone: BackboneConfig) -> TokenPrice | None:
    """USD per million prompt and completion tokens; None for a hosted model without a known price."""
    if isinstance(backbone, RemoteBackbone) and backbone.price is not None:
        return backbone.price
    if backbone.kind != "hosted":
        return TokenPrice()
    return _map_price(backbone.model)


def batch_price_of(backbone: BackboneConfig) -> TokenPrice | None:
    """USD per million tokens sent through the provider's batch API: the map's batch price, else `BATCH_DISCOUNT` of
    the synchronous one (a backbone's own ``price`` too: a negotiated rate is discounted like the list price)."""
    price = price_of(backbone)
    if price is None:
        return None
    if not (isinstance(backbone, RemoteBackbone) and backbone.price is not None) and backbone.kind == "hosted":
        mapped = _map_price(backbone.model, suffix="_batches")
        if mapped is not None:
            return mapped
    return TokenPrice(input=round(price.input * BATCH_DISCOUNT, 9), output=round(price.output * BATCH_DISCOUNT, 9))


def cost_usd(
    backbone: BackboneConfig, prompt_tokens: int, completion_tokens: int, *, batch: bool = False
) -> float | None:
    """Dollars for one call's (or a run's) tokens on this backbone; None when the model's price is unknown.

    ``batch``: sent through the provider's batch API (`batch_price_of`).
    Reasoning tokens are billed as completion tokens (OpenAI counts them in ``completion_tokens``). Cached prompt
    tokens are priced as ordinary ones, so the figure is an upper bound where a provider discounts them.
    """
    price = batch_price_of(backbone) if batch else price_of(backbone)
    if price is None:
        return None
    return (max(prompt_tokens, 0) * price.input + max(completion_tokens, 0) * price.output) / _PER_MILLION


def _map_price(model: str, *, suffix: str = "") -> TokenPrice | None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before the map's first load: never fetch it
    try:
        from dspy.clients.model_metadata import model_info, rate
    except ImportError:  # a DSPy without the bundled map: unknown, not free
        return None
    provider, _, name = model.partition("/")
    info = model_info(provider, name, namespaces=(provider,))
    prompt, completion = rate(info, f"input_cost_per_token{suffix}"), rate(info, f"output_cost_per_token{suffix}")
    if prompt is None or completion is None:
        return None
    return TokenPrice(input=round(prompt * _PER_MILLION, 9), output=round(completion * _PER_MILLION, 9))
