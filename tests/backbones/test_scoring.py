"""Next-token scoring: the embedded engine from logits, and OpenAI-compatible servers from top_logprobs."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import dspy
import numpy as np
import pytest

from clearmed.backbones.embedded import LlamaCppEngine
from clearmed.backbones.llama_runtime import LlamaLoadArgs, SharedModel, fallback_token_counter
from clearmed.backbones.scoring import (
    MAX_TOP_LOGPROBS,
    NextTokenScores,
    OpenAICompatibleScorer,
    ScoringError,
    scorer_for,
)
from clearmed.testing import JsonHandler, QuietHTTPServer

VOCAB = {"A": 0, "B": 1, "C": 2, "D": 3, " A": 4, " B": 5, " C": 6, " D": 7, "other": 8}
KEY = "sk-score-0123456789"


class LetterLlama:
    """Tokenizes known strings to fixed ids; the prompt is one token per character (never the letters)."""

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        decoded = text.decode()
        if decoded in VOCAB:
            return [VOCAB[decoded]]
        return [100 + (ord(ch) % 50) for ch in decoded]

    def create_chat_completion(self, **kwargs: Any) -> Any:
        raise AssertionError("scoring must not generate")


def shared_with(logits: np.ndarray, seen: list[Sequence[int]]) -> SharedModel:
    llm = LetterLlama()

    def next_logits(tokens: Sequence[int]) -> np.ndarray:
        seen.append(list(tokens))
        return logits

    return SharedModel(
        llm=llm,
        args=LlamaLoadArgs(model_path="m.gguf", n_ctx=4096, n_threads=1),
        count_tokens=fallback_token_counter(llm),
        render_prompt=lambda messages: (
            "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>",
            True,
        ),
        next_logits=next_logits,
    )


def engine_with(shared: SharedModel) -> LlamaCppEngine:
    return LlamaCppEngine(shared.args, loader=lambda args: shared)


def test_engine_scores_letters_from_the_logits_summing_space_variants() -> None:
    logits = np.full(200, -10.0)
    logits[VOCAB["B"]], logits[VOCAB[" B"]], logits[VOCAB["A"]] = 3.0, 2.0, 1.0
    seen: list[Sequence[int]] = []
    engine = engine_with(shared_with(logits, seen))
    scores = engine.score_next_token([{"role": "user", "content": "Q?"}], "[[ ## answer ## ]]\n", ["A", "B", "C"])
    dist = scores.distribution()
    assert max(dist, key=dist.__getitem__) == "B"
    expected_b = math.log(math.exp(3.0) + math.exp(2.0))
    expected_a = math.log(math.exp(1.0) + math.exp(-10.0))  # " A" is a variant too
    assert scores.logprobs["B"] - scores.logprobs["A"] == pytest.approx(expected_b - expected_a)
    assert sum(dist.values()) == pytest.approx(1.0)
    assert 0.9 < scores.mass <= 1.0
    assert seen
    assert scores.prompt_tokens == len(seen[0])
    assert engine.stats.calls == 1


def test_engine_refuses_a_prompt_beyond_the_context() -> None:
    shared = shared_with(np.zeros(200), [])
    shared.args = LlamaLoadArgs(model_path="m.gguf", n_ctx=8, n_threads=1)
    engine = LlamaCppEngine(shared.args, loader=lambda args: shared)
    with pytest.raises(Exception, match="context window"):
        engine.score_next_token([{"role": "user", "content": "a long question " * 5}], "", ["A", "B"])


def test_engine_without_a_template_cannot_score() -> None:
    shared = shared_with(np.zeros(200), [])
    shared.render_prompt = None
    with pytest.raises(ScoringError):
        engine_with(shared).score_next_token([{"role": "user", "content": "Q"}], "", ["A"])


class FakeVLLM:
    """/v1/chat/completions as vLLM answers it, with its documented limits:
    - top_logprobs above --max-logprobs (20) -> 400;
    - continue_final_message with add_generation_prompt, or without a final assistant message -> 400;
    - a key configured (--api-key) and a wrong Authorization -> 401 {"error": "Unauthorized"}.
    """

    def __init__(self, top: dict[str, float]) -> None:
        self.requests: list[dict[str, Any]] = []
        owner = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests.append(body)
                if self.headers.get("Authorization") != f"Bearer {KEY}":
                    return self.send_json(401, {"error": "Unauthorized"})
                if body.get("top_logprobs", 0) > MAX_TOP_LOGPROBS:
                    return self.send_json(
                        400,
                        _vllm_error(
                            f"Requested sample logprobs of {body['top_logprobs']}, which is greater than max allowed: 20"
                        ),
                    )
                if body.get("continue_final_message") and body.get("add_generation_prompt", True):
                    return self.send_json(
                        400,
                        _vllm_error("Cannot set both `continue_final_message` and `add_generation_prompt` to True."),
                    )
                if body.get("continue_final_message") and body["messages"][-1]["role"] != "assistant":
                    return self.send_json(400, _vllm_error("continue_final_message needs a final assistant message"))
                items = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top.items()]
                first = max(top, key=top.__getitem__)
                self.send_json(200, {
                    "id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": first},
                                 "logprobs": {"content": [{"token": first, "logprob": top[first], "top_logprobs": items}]},
                                 "finish_reason": "length"}],
                    "usage": {"prompt_tokens": 321, "completion_tokens": 1, "total_tokens": 322},
                })  # fmt: skip

        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.api_base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _vllm_error(message: str) -> dict[str, Any]:
    return {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400}


@pytest.fixture
def vllm() -> Iterator[FakeVLLM]:
    server = FakeVLLM({"C": -0.2, " C": -2.5, "A": -1.9, "The": -3.0})
    yield server
    server.close()


def test_openai_compatible_scorer_reads_top_logprobs(vllm: FakeVLLM) -> None:
    scorer = OpenAICompatibleScorer(vllm.api_base, "Qwen/Qwen3.5-9B", KEY)
    scores = scorer.score_next_token([{"role": "user", "content": "Q?"}], "[[ ## answer ## ]]\n", ["A", "B", "C", "D"])
    request = vllm.requests[-1]
    assert request["messages"][-1] == {"role": "assistant", "content": "[[ ## answer ## ]]\n"}
    assert request["max_tokens"] == 1
    dist = scores.distribution()
    assert max(dist, key=dist.__getitem__) == "C"
    assert scores.logprobs["C"] == pytest.approx(math.log(math.exp(-0.2) + math.exp(-2.5)))
    assert scores.logprobs["B"] == scores.logprobs["D"] < -3.0  # unlisted: below everything listed
    assert scores.prompt_tokens == 321


def test_openai_compatible_scorer_errors_are_one_line_without_the_key(vllm: FakeVLLM) -> None:
    with pytest.raises(ScoringError, match="HTTP 401: Unauthorized") as raised:
        OpenAICompatibleScorer(vllm.api_base, "m", "sk-wrong").score_next_token([], "x", ["A"])
    assert "sk-wrong" not in str(raised.value)
    with pytest.raises(ScoringError, match="request failed"):
        OpenAICompatibleScorer("http://127.0.0.1:9/v1", "m", KEY, timeout=2).score_next_token([], "x", ["A"])


def test_scorer_for_picks_the_backend() -> None:
    engine = engine_with(shared_with(np.zeros(200), []))
    local = dspy.LM("local/m", engine=engine)
    assert scorer_for(local) is engine
    served = dspy.LM("openai/Qwen/Qwen3.5-9B", api_base="http://127.0.0.1:8000/v1", api_key="none")
    assert isinstance(scorer_for(served), OpenAICompatibleScorer)
    assert scorer_for(dspy.LM("openai/o3-mini", api_key="sk-x")) is None


def test_scores_distribution_and_mass() -> None:
    scores = NextTokenScores(logprobs={"A": math.log(0.3), "B": math.log(0.1)})
    assert scores.distribution() == pytest.approx({"A": 0.75, "B": 0.25})
    assert scores.mass == pytest.approx(0.4)
