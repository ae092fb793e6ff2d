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
import requests

from clearmed.backbones.embedded import LlamaCppEngine
from clearmed.backbones.llama_runtime import LlamaLoadArgs, SharedModel, fallback_token_counter
from clearmed.backbones.logprobs import (
    MAX_TOP_LOGPROBS,
    NextTokenScores,
    OpenAICompatibleScorer,
    ScoringError,
    probe_capabilities,
    token_scorer,
)
from clearmed.core.endpoints import mark_reached
from clearmed.core.errors import FatalServiceError
from clearmed.testing import JsonHandler, QuietHTTPServer

from .conftest import ChatTemplateError, logprob_completion, render_as_vllm

VOCAB = {"A": 0, "B": 1, "C": 2, "D": 3, " A": 4, " B": 5, " C": 6, " D": 7, "other": 8,
         "yes": 9, " yes": 10, "Yes": 11, " Yes": 12, "no": 13, " no": 14, "No": 15, " No": 16}  # fmt: skip
# Not in VOCAB, so spelled in several tokens: "YES" starts with "Y"'s token, which is not the word.
Y_TOKEN = 100 + ord("Y") % 50
KEY = "sk-score-0123456789"


class LetterLlama:
    """Tokenizes known strings to fixed ids; anything else is one token per character (never the letters)."""

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
        render_prompt=lambda messages: (render_as_vllm(messages), True),  # as llama.cpp's Jinja2ChatFormatter
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


def test_engine_sums_the_case_variants_of_yes_and_no() -> None:
    # Issue 25: a chat model answers "Yes"/"No"; reading "yes"/" yes" alone inverts this answer.
    logits = np.full(200, -10.0)
    logits[VOCAB["No"]], logits[VOCAB["Yes"]], logits[VOCAB["yes"]], logits[Y_TOKEN] = 4.0, 2.0, 1.0, 6.0
    seen: list[Sequence[int]] = []
    scores = engine_with(shared_with(logits, seen)).score_next_token(
        [{"role": "user", "content": "Is it? Reply with yes or no only."}], "", ["yes", "no"]
    )
    assert scores.logprobs["yes"] - scores.logprobs["no"] == pytest.approx(
        np.logaddexp.reduce([2.0, 1.0, -10.0, -10.0]) - np.logaddexp.reduce([4.0, -10.0, -10.0, -10.0])
    )  # "YES" is several tokens here: its first piece ("Y") is not counted
    assert scores.distribution()["yes"] == pytest.approx(
        (math.exp(2) + math.exp(1)) / (math.exp(2) + math.exp(1) + math.exp(4)), abs=1e-3
    )


def test_engine_refuses_a_candidate_that_is_no_single_token() -> None:
    engine = engine_with(shared_with(np.zeros(200), []))
    with pytest.raises(ScoringError, match="no spelling of 'maybe' is one token"):
        engine.score_next_token([{"role": "user", "content": "Q"}], "", ["yes", "maybe"])


def test_engine_refuses_non_finite_logits() -> None:
    logits = np.zeros(200)
    logits[VOCAB["B"]] = np.nan  # a broken build's logits: every log-probability becomes NaN
    with pytest.raises(ScoringError, match="non-finite"):
        engine_with(shared_with(logits, [])).score_next_token([{"role": "user", "content": "Q"}], "", ["A", "B"])


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


# What Qwen2.5 writes next, by how its prompt ends: a letter after the answer marker or as its reply, and a new
# turn after a closed one (the scorer reading there finds no candidate at all).
ANSWER_OPEN = "<|im_start|>assistant\n[[ ## answer ## ]]\n"
REPLY_OPEN = "<|im_start|>assistant\n"
TURN_CLOSED = "<|im_end|>\n"
LETTERS_NEXT = {"C": -0.2, " C": -2.5, "A": -1.9, "The": -3.0}
NEW_TURN_NEXT = {"<|im_start|>": -0.01, "<|endoftext|>": -4.7}
NEXT_TOKENS = {ANSWER_OPEN: LETTERS_NEXT, REPLY_OPEN: LETTERS_NEXT, TURN_CLOSED: NEW_TURN_NEXT}


class FakeVLLM:
    """/v1/chat/completions as vLLM answers it for Qwen2.5-Instruct, with its documented limits:
    - the messages are rendered through the model's real chat template under vLLM's ``continue_final_message`` /
      ``add_generation_prompt`` rules (`conftest.render_as_vllm`); a request it refuses -> 400;
    - the next token's ``top_logprobs`` depend on how the rendered prompt ends (the longest ending of
      ``next_tokens`` that matches; none: a new turn's ``<|im_start|>``), as a model's do;
    - top_logprobs above --max-logprobs (20) -> 400;
    - a key configured (--api-key) and a wrong Authorization -> 401 {"error": "Unauthorized"}.
    """

    def __init__(self, next_tokens: dict[str, dict[str, float]]) -> None:
        self.requests: list[dict[str, Any]] = []
        self.prompts: list[str] = []
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
                try:
                    prompt = render_as_vllm(
                        body["messages"],
                        add_generation_prompt=body.get("add_generation_prompt", True),  # vLLM's defaults
                        continue_final_message=body.get("continue_final_message", False),
                    )
                except ChatTemplateError as exc:
                    return self.send_json(400, _vllm_error(str(exc)))
                owner.prompts.append(prompt)
                ending = max((e for e in next_tokens if prompt.endswith(e)), key=len, default=None)
                top = NEW_TURN_NEXT if ending is None else next_tokens[ending]
                self.send_json(200, logprob_completion(body["model"], top, prompt_tokens=321))

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
    server = FakeVLLM(NEXT_TOKENS)
    yield server
    server.close()


def test_openai_compatible_scorer_reads_top_logprobs(vllm: FakeVLLM) -> None:
    scorer = OpenAICompatibleScorer(vllm.api_base, "Qwen/Qwen3.5-9B", KEY)
    scores = scorer.score_next_token([{"role": "user", "content": "Q?"}], "[[ ## answer ## ]]\n", ["A", "B", "C", "D"])
    request = vllm.requests[-1]
    assert request["messages"][-1] == {"role": "assistant", "content": "[[ ## answer ## ]]\n"}
    assert (request["continue_final_message"], request["add_generation_prompt"]) == (True, False)
    assert vllm.prompts[-1].endswith("<|im_start|>user\nQ?<|im_end|>\n" + ANSWER_OPEN)  # inside the open turn
    assert request["max_tokens"] == 1
    dist = scores.distribution()
    assert max(dist, key=dist.__getitem__) == "C"
    assert scores.logprobs["C"] == pytest.approx(math.log(math.exp(-0.2) + math.exp(-2.5)))
    assert scores.logprobs["B"] == scores.logprobs["D"] < -3.0  # unlisted: below everything listed
    assert scores.prompt_tokens == 321


def test_openai_compatible_scorer_opens_the_assistant_turn_for_an_empty_prefix(vllm: FakeVLLM) -> None:
    # Issue 25: an empty final assistant message is rendered as a closed turn (`<|im_start|>assistant\n<|im_end|>\n`)
    # and the token read after it is a new turn's, not the answer (the multi-answer and plain prompts' position).
    scorer = OpenAICompatibleScorer(vllm.api_base, "Qwen/Qwen2.5-7B-Instruct", KEY)
    user = {"role": "user", "content": "Which option?\n\nAnswer with the letter of the correct option only."}
    scores = scorer.score_next_token([user], "", ["A", "B", "C", "D"])
    request = vllm.requests[-1]
    assert request["messages"] == [user]  # no assistant message
    assert request["add_generation_prompt"] is True
    assert not request.get("continue_final_message")
    assert vllm.prompts[-1].endswith("only.<|im_end|>\n" + REPLY_OPEN)
    dist = scores.distribution()
    assert max(dist, key=dist.__getitem__) == "C"
    assert dist["C"] > 0.7
    # a whitespace-only prefix would be stripped by the template rule and close the turn as well
    with pytest.raises(ScoringError, match="whitespace-only"):
        scorer.score_next_token([user], "\n", ["A"])


def test_fake_vllm_applies_vllms_chat_template_rules(vllm: FakeVLLM) -> None:
    """The fake refuses what vLLM refuses, so a scorer request it accepts is one vLLM would accept."""
    user = {"role": "user", "content": "Q?"}
    for body in (
        {"messages": [user, {"role": "assistant", "content": "x"}], "continue_final_message": True},  # both true
        {"messages": [user], "continue_final_message": True, "add_generation_prompt": False},  # no final assistant
    ):
        reply = requests.post(
            f"{vllm.api_base}/chat/completions",
            json={"model": "m", **body},
            headers={"Authorization": f"Bearer {KEY}"},
            timeout=10,
        )
        assert reply.status_code == 400
    closed = render_as_vllm(
        [user, {"role": "assistant", "content": ""}], add_generation_prompt=False, continue_final_message=True
    )
    assert closed.endswith("<|im_start|>assistant\n<|im_end|>\n")
    system = render_as_vllm([{"role": "system", "content": "S"}, user])
    assert system == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ?<|im_end|>\n<|im_start|>assistant\n"


def test_a_reply_with_no_candidate_among_the_top_tokens_is_refused() -> None:
    # Read after a closed turn (or wherever the model wants to write something else), no letter is listed: every
    # candidate would get the same floor, a uniform "distribution" whose first letter wins. Refused instead.
    server = FakeVLLM({REPLY_OPEN: {"<|im_start|>": -0.01, "The": -4.0}})
    try:
        scorer = OpenAICompatibleScorer(server.api_base, "m", KEY)
        with pytest.raises(ScoringError, match="none of A, B is among the server's top 2 next tokens"):
            scorer.score_next_token([{"role": "user", "content": "Q?"}], "", ["A", "B"])
    finally:
        server.close()


def test_openai_compatible_scorer_sums_the_case_variants_of_yes_and_no() -> None:
    # Issue 25: a chat model answers "Yes"/"No"; reading the lowercase tokens alone inverts this answer.
    server = FakeVLLM({REPLY_OPEN: {"No": -0.1, " No": -3.5, "Yes": -2.6, "yes": -4.0, "NO": -6.0, "The": -7.0}})
    try:
        scorer = OpenAICompatibleScorer(server.api_base, "m", KEY)
        scores = scorer.score_next_token(
            [{"role": "user", "content": "Is it? Reply with yes or no only."}], "", ["yes", "no"]
        )
    finally:
        server.close()
    assert scores.logprobs["yes"] == pytest.approx(np.logaddexp(-2.6, -4.0))
    assert scores.logprobs["no"] == pytest.approx(np.logaddexp.reduce([-0.1, -3.5, -6.0]))
    assert scores.distribution()["yes"] < 0.15


def test_openai_compatible_scorer_refuses_non_finite_log_probabilities() -> None:
    server = FakeVLLM({REPLY_OPEN: {"A": float("nan"), "B": -1.0}})  # Python's json writes and reads NaN
    try:
        with pytest.raises(ScoringError, match="non-finite"):
            OpenAICompatibleScorer(server.api_base, "m", KEY).score_next_token(
                [{"role": "user", "content": "Q"}], "", ["A", "B"]
            )
    finally:
        server.close()


def test_openai_compatible_scorer_errors_are_one_line_without_the_key(vllm: FakeVLLM) -> None:
    # A refused key stops the run, as for a generated answer (issue 32 item 4): fatal, one line, no key.
    with pytest.raises(FatalServiceError, match=r"authentication failed \(HTTP 401\): Unauthorized") as raised:
        OpenAICompatibleScorer(vllm.api_base, "m", "sk-wrong").score_next_token([], "x", ["A"])
    assert "sk-wrong" not in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_refused_scoring_endpoint_stops_the_run_until_it_has_answered_once(closed_port: int) -> None:
    """Before: a mistyped address was a transient ScoringError on every question (each then generated, and degraded)."""
    base = f"http://127.0.0.1:{closed_port}/v1"
    scorer = OpenAICompatibleScorer(base, "m", KEY, timeout=2, num_retries=0, service="main backbone openai/m")
    with pytest.raises(FatalServiceError) as stopped:
        scorer.score_next_token([], "x", ["A"])
    assert str(stopped.value).startswith("main backbone openai/m: unreachable: ")
    assert f"http://127.0.0.1:{closed_port} refused the connection" in str(stopped.value)
    mark_reached(base)  # it answered once: a refusal now is a server restarting, retried and then transient
    with pytest.raises(ScoringError, match="request failed") as failed:
        scorer.score_next_token([], "x", ["A"])
    assert failed.value.transient


def test_token_scorer_picks_the_backend() -> None:
    engine = engine_with(shared_with(np.zeros(200), []))
    local = dspy.LM("local/m", engine=engine)
    traced = token_scorer(local)
    assert traced is not None
    assert traced.scorer is engine
    assert traced.lm is local
    served = dspy.LM("openai/Qwen/Qwen3.5-9B", api_base="http://127.0.0.1:8000/v1", api_key="none")
    assert isinstance(getattr(token_scorer(served), "scorer", None), OpenAICompatibleScorer)
    assert token_scorer(dspy.LM("openai/o3-mini", api_key="sk-x")) is None


def test_scores_distribution_and_mass() -> None:
    scores = NextTokenScores(logprobs={"A": math.log(0.3), "B": math.log(0.1)})
    assert scores.distribution() == pytest.approx({"A": 0.75, "B": 0.25})
    assert scores.mass == pytest.approx(0.4)
    impossible = NextTokenScores(logprobs={"A": -math.inf, "B": math.log(0.2)})  # one candidate at zero is fine
    assert impossible.distribution() == {"A": 0.0, "B": 1.0}


@pytest.mark.parametrize(
    "logprobs",
    [
        {"A": math.nan, "B": -1.0},
        {"A": -math.inf, "B": -math.inf},
        {"A": math.inf, "B": -1.0},
        {},
    ],
    ids=["nan", "all-minus-inf", "plus-inf", "empty"],
)
def test_non_finite_log_probabilities_are_refused(logprobs: dict[str, float]) -> None:
    # Issue 25: these gave a distribution of NaNs, the pool picked "A" and the record failed to reload.
    with pytest.raises(ScoringError, match=r"non-finite|no candidate has a finite"):
        NextTokenScores(logprobs=logprobs)


def test_the_capability_probe_on_vllm(vllm: FakeVLLM) -> None:
    found = probe_capabilities(vllm.api_base, "Qwen/Qwen3.5-9B", KEY)
    assert (found.logprobs, found.continues_message) == (True, True)
    assert found.logprobs_note.endswith(" top tokens")
    asked, continued = vllm.requests[-2:]
    assert (asked["logprobs"], asked["top_logprobs"], asked["max_tokens"]) == (True, 5, 1)
    assert (continued["continue_final_message"], continued["add_generation_prompt"]) == (True, False)
    assert continued["messages"][-1]["role"] == "assistant"
    assert vllm.prompts[-1].endswith("The answer is")  # rendered inside the open assistant turn


def test_the_capability_probe_on_servers_that_cannot() -> None:
    from .fake_openai import ScriptedOpenAI, openai_error

    with ScriptedOpenAI() as server:  # answers 200 without log-probabilities; refuses the continued message
        server.script.append((200, server.completion({"model": "m"}), {}))
        server.script.append(openai_error(400, "continue_final_message is not supported"))
        found = probe_capabilities(server.api_base, "m", None)
    assert (found.logprobs, found.logprobs_note) == (False, "the reply has no top_logprobs")
    assert (found.continues_message, found.continue_note) == (
        False,
        "HTTP 400: continue_final_message is not supported",
    )
    with ScriptedOpenAI() as server:
        server.script.append(openai_error(400, "logprobs are not supported for key sk-secret-key-000000"))
        found = probe_capabilities(server.api_base, "m", "sk-secret-key-000000")
    assert (found.logprobs, found.logprobs_note) == (False, "HTTP 400: logprobs are not supported for key ***")
    assert found.continues_message is True  # a 200: not refused
    unreachable = probe_capabilities("http://127.0.0.1:9/v1", "m", None, timeout=2)
    assert (unreachable.logprobs, unreachable.continues_message) == (None, None)
    assert unreachable.logprobs_note.startswith("request failed: ")
