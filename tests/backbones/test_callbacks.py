"""Every LM call a program makes is seen by DSPy's callbacks (issue 50 item 8), scored answers included, so a
`BaseCallback` (or ``mlflow.dspy.autolog()``, which is one) traces a CLEAR question whole in either decoding mode.

Before: with ``mcq_decoding = "score"`` the scorer called the engine (or posted to the server) beside DSPy's LM, and a
counting callback saw none of the scoring passes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dspy
import pytest
from dspy.utils.callback import BaseCallback

from clearmed.backbones.logprobs import token_scorer
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import QUESTION, build_toy_program, pathway_replies
from tests.programs.test_option_scoring import SCORES
from tests.programs.test_option_scoring import SCRIPT as SCORED_SCRIPT

from .replay_server import ReplayServer, Reply

# One CLEAR question on the toy world (test_option_scoring's): the pathways disagree (A, A, C), so the verifier, the
# follow-up search, the guard and the audit all run; scored, the same letters come from its distributions.
SCRIPT: dict[str, Any] = {**pathway_replies("A", "A", "C"), **SCORED_SCRIPT}


class Counting(BaseCallback):
    """Records each LM call's start (the LM, DSPy's inputs) and end (outputs, exception), by call id."""

    def __init__(self) -> None:
        self.started: dict[str, tuple[Any, dict[str, Any]]] = {}
        self.ended: dict[str, tuple[Any, BaseException | None]] = {}

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        self.started[call_id] = (instance, inputs)

    def on_lm_end(self, call_id: str, outputs: Any, exception: BaseException | None = None) -> None:
        self.ended[call_id] = (outputs, exception)

    def scored(self) -> list[dict[str, Any]]:
        return [inputs for _, inputs in self.started.values() if inputs.get("kwargs", {}).get("logprobs")]


@pytest.mark.parametrize("where", ["settings", "lm"])
@pytest.mark.parametrize("decoding", ["score", "generate"])
def test_a_callback_sees_every_lm_call_of_a_clear_question(decoding: str, where: str) -> None:
    settings = ProgramSettings(json_fallback=False, parallel_pathways="off", mcq_decoding=decoding)  # type: ignore[arg-type]
    program, engine, _ = build_toy_program(SCRIPT, settings=settings, scores=SCORES)
    lm = program.role_lms["main"]
    counting = Counting()
    if where == "lm":  # the LM's own callbacks, as `dspy.LM(..., callbacks=[...])` sets them
        lm.callbacks = [counting]
        decision = program(question=QUESTION).decision
    else:  # `dspy.configure(callbacks=[...])`
        with dspy.context(callbacks=[counting]):
            decision = program(question=QUESTION).decision
    assert decision.status == "answered"
    made = len(engine.calls) + len(engine.scored)  # every call the engine served, generated or scored
    assert len(engine.scored) == (3 if decoding == "score" else 0)
    assert len(counting.started) == made
    assert counting.ended.keys() == counting.started.keys()
    assert all(instance is lm for instance, _ in counting.started.values())
    assert all(exception is None for _, exception in counting.ended.values())
    assert len(counting.scored()) == len(engine.scored)


def test_a_scored_call_is_reported_in_dspy_s_shapes() -> None:
    """on_lm_start gets DSPy's LM inputs (prompt, messages, kwargs); on_lm_end a list of completions, as for
    `dspy.LM.__call__`, so a tracer that reads a generated call reads a scored one."""
    settings = ProgramSettings(json_fallback=False, parallel_pathways="off", mcq_decoding="score")
    program, engine, _ = build_toy_program(SCRIPT, settings=settings, scores=SCORES)
    counting = Counting()
    with dspy.context(callbacks=[counting]):
        program(question=QUESTION)
    call_id, (_, inputs) = next(
        (key, value) for key, value in counting.started.items() if value[1].get("kwargs", {}).get("logprobs")
    )
    assert set(inputs) == {"prompt", "messages", "kwargs"}
    assert inputs["prompt"] is None
    messages, prefix = engine.scored_prompts[0]
    assert inputs["messages"] == [*messages, {"role": "assistant", "content": prefix}]
    assert inputs["kwargs"] == {"max_tokens": 1, "logprobs": True, "candidates": ["A", "B", "C", "D"]}
    outputs, _ = counting.ended[call_id]
    (completion,) = outputs
    assert completion["text"] == "A"  # the parametric pathway's most probable letter
    assert completion["logprobs"].keys() == {"A", "B", "C", "D"}


SCORED = {
    "choices": [{"logprobs": {"content": [{"top_logprobs": [{"token": "A", "logprob": -0.1},
                                                            {"token": "B", "logprob": -2.5}]}]}}],
    "usage": {"prompt_tokens": 12},
}  # fmt: skip


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    with ReplayServer() as fake:
        yield fake


def test_a_scoring_pass_over_http_is_a_traced_call_of_its_lm_failures_included(server: ReplayServer) -> None:
    counting = Counting()
    lm = dspy.LM("openai/m", api_base=server.api_base, api_key="none", callbacks=[counting], num_retries=0)
    scorer = token_scorer(lm)
    assert scorer is not None
    server.chat = [Reply(200, SCORED), Reply(400, {"error": {"message": "bad request"}})]
    scores = scorer.score_next_token([{"role": "user", "content": "A or B?"}], "", ["A", "B"])
    assert scores.distribution()["A"] > 0.8
    with pytest.raises(Exception, match="HTTP 400"):
        scorer.score_next_token([{"role": "user", "content": "A or B?"}], "", ["A", "B"])
    assert len(server.chat_requests()) == len(counting.started) == 2
    first, second = counting.ended.values()
    assert first[0][0]["logprobs"] == scores.logprobs
    assert first[1] is None
    assert second[0] is None
    assert "HTTP 400" in str(second[1])  # the failure reaches the tracer as DSPy reports a failed call
