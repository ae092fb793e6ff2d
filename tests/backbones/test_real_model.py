"""The real embedded model, end to end (slow: assembles/loads a 1.1 GB GGUF on first run)."""

from __future__ import annotations

import importlib.util

import dspy
import pytest

from clearmed.backbones.config import parse_backbone
from clearmed.backbones.factory import build_lm
from clearmed.backbones.model_files import PACKAGED_MODELS

pytestmark = pytest.mark.slow


def _embedded_installed() -> bool:
    spec = PACKAGED_MODELS["qwen2.5-coder-1.5b-instruct-q4_k_m"]
    modules = ("llama_cpp", *spec.part_modules)
    return all(importlib.util.find_spec(name) is not None for name in modules)


@pytest.mark.skipif(not _embedded_installed(), reason="needs the `embedded` extra (llama-cpp-python + model parts)")
def test_packaged_model_answers_through_dspy() -> None:
    cfg = parse_backbone(
        {"kind": "embedded", "model": "qwen2.5-coder-1.5b", "n_ctx": 2048}
        | {"temperature": 0.0, "max_tokens": 64, "cache": False, "num_retries": 0}
    )
    lm = build_lm(cfg)
    pred = dspy.Predict("question -> answer")(question="What is the capital of France? One word.", lm=lm)
    assert "paris" in pred.answer.lower()
    usage = lm.history[-1]["usage"]
    assert usage["prompt_tokens"] > 50
    assert usage["completion_tokens"] > 0
    assert lm.engine.stats.calls == 1
    # The pre-flight count (chat template + tokenizer) must agree with what llama.cpp evaluated.
    shared = lm.engine.load()
    request_messages = lm.history[-1]["messages"]
    assert shared.count_tokens(request_messages) == usage["prompt_tokens"]


@pytest.mark.skipif(not _embedded_installed(), reason="needs the `embedded` extra (llama-cpp-python + model parts)")
def test_ram_prompt_cache_keeps_lean_states() -> None:
    cfg = parse_backbone(
        {"kind": "embedded", "model": "qwen2.5-coder-1.5b", "n_ctx": 2048, "prompt_cache_mb": 64}
        | {"temperature": 0.0, "max_tokens": 4, "cache": False, "num_retries": 0}
    )
    lm = build_lm(cfg)
    lm("Say hi.")
    states = list(lm.engine.load().llm.cache.cache_state.values())
    assert len(states) == 1
    assert states[0].scores.shape[0] == 1  # no 311 MB logits copy per saved prompt
    assert 0 < states[0].llama_state_size < 64 * 1024 * 1024
