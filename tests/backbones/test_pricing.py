"""Dollars per token: LiteLLM's bundled price map for hosted models, the config's price for self-hosted ones."""

from __future__ import annotations

import os
from typing import Any

import pytest

from clearmed.backbones.config import TokenPrice, parse_backbone
from clearmed.backbones.pricing import cost_usd, price_of


def hosted(model: str, **table: Any) -> Any:
    return parse_backbone({"kind": "hosted", "model": model, "api_key_env": "K", **table})


def test_hosted_models_are_priced_from_the_bundled_map_without_fetching(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    # o3-mini: $1.10 per 1M prompt tokens, $4.40 per 1M completion tokens (LiteLLM's map as DSPy 3.4 bundles it)
    assert price_of(hosted("openai/o3-mini")) == TokenPrice(input=1.1, output=4.4)
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"  # the local copy, never the network
    assert cost_usd(hosted("openai/o3-mini"), 1_000_000, 0) == pytest.approx(1.1)
    assert cost_usd(hosted("azure/o3-mini"), 2000, 500) == pytest.approx((2000 * 1.1 + 500 * 4.4) / 1e6)
    assert cost_usd(hosted("openai/gpt-4.1"), 1000, 1000) == pytest.approx((1000 * 2.0 + 1000 * 8.0) / 1e6)


def test_an_unknown_hosted_model_has_no_price_rather_than_a_free_one() -> None:
    assert price_of(hosted("openai/no-such-model-2031")) is None
    assert cost_usd(hosted("openai/no-such-model-2031"), 10, 10) is None


def test_self_hosted_models_cost_their_configured_price() -> None:
    vllm = {"kind": "openai_compatible", "model": "Qwen/Qwen3.5-9B", "api_base": "http://127.0.0.1:8000/v1"}
    assert cost_usd(parse_backbone(vllm), 10_000, 10_000) == 0.0
    priced = parse_backbone({**vllm, "price": {"input": 0.05, "output": 0.25}})
    assert cost_usd(priced, 2_000_000, 1_000_000) == pytest.approx(0.35)
    assert cost_usd(parse_backbone({"kind": "embedded", "model": "m"}), 10**6, 10**6) == 0.0


def test_a_configured_price_overrides_the_map() -> None:
    negotiated = hosted("openai/o3-mini", price={"input": 0.55, "output": 2.2})
    assert cost_usd(negotiated, 1_000_000, 1_000_000) == pytest.approx(2.75)
