"""`<think>` blocks out of the answer: the pure rule, and the LM that applies it to every completion."""

from __future__ import annotations

import asyncio
from typing import Any

import dspy
import pytest
from dspy.lm15 import Message, Request, Response, TextPart, Usage

from clearmed.backbones.client import ClearmedLM, strip_thinking
from clearmed.backbones.reasoning import collect_thinking, split_thinking


@pytest.mark.parametrize(
    ("text", "answer", "thinking"),
    [
        ("Paris", "Paris", ""),
        ("<think>capital of France</think>Paris", "Paris", "capital of France"),
        ("<think>\nstep 1\nstep 2\n</think>\n\n[[ ## answer ## ]]\nB", "[[ ## answer ## ]]\nB", "step 1\nstep 2"),
        # the chat template opened the block in the prompt (Qwen3): only the closing tag is generated
        ("so the answer is B\n</think>\nB", "B", "so the answer is B"),
        # cut off by the output budget: none of the thought may reach the answer
        ("<think>the patient has fever and a rash, so", "", "the patient has fever and a rash, so"),
        ("Answer first. <think>unfinished", "Answer first.", "unfinished"),
        ("<think>a</think>X<think>b</think>Y", "XY", "a\n\nb"),
        ("<THINK>loud</THINK>quiet", "quiet", "loud"),
        ("<think></think>B", "B", ""),
        ("I think the answer is B", "I think the answer is B", ""),
        ("<think>outer <think>inner</think>B", "B", "outer\n\ninner"),
    ],
)
def test_split_thinking(text: str, answer: str, thinking: str) -> None:
    assert split_thinking(text) == (answer, thinking)


def test_outputs_keep_their_shape_and_gain_reasoning_content() -> None:
    outputs = [
        "plain",
        "<think>t</think>answer",
        {"text": "<think>u</think>answer", "logprobs": [1]},
        {"text": "answer", "reasoning_content": "split by the server"},
    ]
    with collect_thinking() as log:
        stripped = strip_thinking(outputs)
    assert stripped == [
        "plain",
        {"text": "answer", "reasoning_content": "t"},
        {"text": "answer", "logprobs": [1], "reasoning_content": "u"},
        {"text": "answer", "reasoning_content": "split by the server"},
    ]
    assert log.texts == ["t", "u", "split by the server"]
    typed = Response(
        id=None, model="m", message=Message.assistant([TextPart("x")]), finish_reason="stop", usage=Usage(1, 1)
    )
    assert strip_thinking(typed) is typed  # an explicit Request's typed Response is left alone


class ThinkingEngine:
    """A DSPy engine whose model thinks before answering, optionally running out of budget mid-thought."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.requests: list[Request] = []

    def complete(self, request: Request) -> Response:
        self.requests.append(request)
        return Response(
            id=None,
            model="local/thinker",
            message=Message.assistant([TextPart(self.text)]),
            finish_reason="stop",
            usage=Usage(input_tokens=10, output_tokens=5),
        )

    def close(self) -> None:
        pass


class AsyncThinkingEngine:
    def __init__(self, sync: ThinkingEngine) -> None:
        self.sync = sync

    async def complete(self, request: Request) -> Response:
        return self.sync.complete(request)

    async def aclose(self) -> None:
        pass


def thinker(text: str, **kwargs: Any) -> tuple[ClearmedLM, ThinkingEngine]:
    engine = ThinkingEngine(text)
    lm = ClearmedLM(
        "local/thinker", engine=engine, async_engine=AsyncThinkingEngine(engine), cache=False, num_retries=0, **kwargs
    )
    return lm, engine


ANSWER = "[[ ## answer ## ]]\nmeasles\n\n[[ ## completed ## ]]"


def test_dspy_parses_the_answer_and_the_trail_keeps_the_thought() -> None:
    lm, _ = thinker(f"<think>Koplik spots are pathognomonic for measles.</think>\n{ANSWER}")
    predict = dspy.Predict("question -> answer")
    with collect_thinking() as log, dspy.context(adapter=dspy.ChatAdapter(use_json_adapter_fallback=False)):
        prediction = predict(question="Koplik spots?", lm=lm)
    assert prediction.answer == "measles"
    assert log.text == "Koplik spots are pathognomonic for measles."
    assert "<think>" in str(lm.history[-1]["outputs"][0])  # DSPy's history keeps the raw completion


def test_async_calls_strip_too() -> None:
    lm, _ = thinker(f"<think>hmm</think>{ANSWER}")

    async def ask() -> Any:
        with collect_thinking() as log:
            outputs = await lm.acall("Koplik spots?")
        return outputs, log.texts

    outputs, thoughts = asyncio.run(ask())
    assert outputs == [{"text": ANSWER, "reasoning_content": "hmm"}]
    assert thoughts == ["hmm"]


def test_a_thought_cut_off_never_becomes_the_answer() -> None:
    lm, _ = thinker("<think>The answer is clearly [[ ## answer ## ]]\nmeasles but wait")
    predict = dspy.Predict("question -> answer")
    with (
        dspy.context(adapter=dspy.ChatAdapter(use_json_adapter_fallback=False)),
        pytest.raises(dspy.AdapterParseError, match="empty or null response"),
    ):
        predict(question="Koplik spots?", lm=lm)


def test_a_reasoning_backbone_keeps_room_to_think_under_a_stage_cap() -> None:
    lm, engine = thinker(ANSWER, max_tokens=8192, min_output_tokens=8192)
    lm("q", max_tokens=256)  # a stage's cap: below the floor, raised to it
    lm("q", max_tokens=12000)  # above the floor: kept
    lm("q")
    assert [r.config.max_tokens for r in engine.requests] == [8192, 12000, 8192]
    plain, plain_engine = thinker(ANSWER, max_tokens=1024)
    plain("q", max_tokens=256)
    assert plain_engine.requests[0].config.max_tokens == 256  # a backbone that does not think: caps apply
