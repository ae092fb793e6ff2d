"""A stage learns the window from a context-length error, refits its prompt and tries once more (issue 37); an overflow
after that is recorded as deterministic, not transient (issue 31 item 2); the prompt is counted by the server's
tokenizer where it has one; and a failure before the call is recorded, not an UnboundLocalError (issue 31 item 9).

Through the real client (`ClearmedLM` over HTTP) against a fake server answering with llama-cpp-python's own overflow
body (tests/backbones/fixtures/server_replies.json)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import dspy
import pytest

from clearmed.backbones import client
from clearmed.backbones.config import parse_backbone
from clearmed.backbones.factory import build_lm
from clearmed.programs.lm.context import RunContext, activate
from clearmed.programs.lm.parsing import TolerantChatAdapter
from clearmed.programs.lm.prompting import estimate_tokens, format_passages, passage_blocks
from clearmed.programs.lm.stage import StageResult, _prompt_text, run_stage
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import LOCAL, WEB
from tests.backbones.replay_server import REPLIES, ReplayServer, Reply

BUDGET = 64
EVIDENCE = format_passages(LOCAL + WEB, None)
INPUTS = {"question": "Which vitamin deficiency causes scurvy?", "evidence": EVIDENCE}


@pytest.fixture(autouse=True)
def no_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "pause", lambda seconds: None)


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    with ReplayServer() as fake:
        yield fake


def predictor() -> dspy.Predict:
    return dspy.Predict("question, evidence -> answer")


def estimated(inputs: dict[str, object]) -> int:
    adapter = TolerantChatAdapter(use_json_adapter_fallback=False)
    return estimate_tokens(_prompt_text(predictor(), adapter, inputs))


def llama_cpp_overflow(limit: int, prompt: int) -> Reply:
    """llama-cpp-python's server's own overflow body, with these numbers."""
    case = next(c for c in REPLIES["overflow"] if c["name"] == "llama_cpp_python")
    body = copy.deepcopy(case["body"])
    body["error"]["message"] = (
        f"This model's maximum context length is {limit} tokens. However, you requested {prompt + BUDGET} tokens "
        f"({prompt} in the messages, {BUDGET} in the completion). Please reduce the length of the messages or "
        "completion."
    )
    return Reply(400, body)


def run(lm: Any, inputs: dict[str, object] = INPUTS) -> tuple[StageResult, Any]:
    context = RunContext(settings=ProgramSettings(max_tokens={"parametric": BUDGET}), role_lms={"main": lm})
    with activate(context):
        result = run_stage("parametric", predictor(), **inputs)
    (row,) = context.ledger.rows
    return result, row


def lm_for(server: ReplayServer, **table: Any) -> Any:
    base = {"kind": "openai_compatible", "model": "served-model", "api_base": server.api_base, "cache": False}
    return build_lm(parse_backbone({**base, **table}))


def evidence_blocks(request: dict[str, Any]) -> int:
    return sum(len(passage_blocks(m["content"])) for m in request["body"]["messages"])


def test_an_overflow_that_names_the_window_is_refitted_and_retried(server: ReplayServer) -> None:
    full = estimated(INPUTS)
    limit = int(full * 0.8)  # the refused prompt, a fifth too long for the server's window
    server.chat = [llama_cpp_overflow(limit, prompt=full)]
    lm = lm_for(server)
    assert lm.context_window is None  # llama-cpp-python's server reports no window: unknown before the first call
    result, row = run(lm)
    assert result.ok, result.error
    first, second = server.chat_requests()
    assert evidence_blocks(second) < evidence_blocks(first) == len(LOCAL) + len(WEB)
    assert (row.refits, row.failed) == (1, False)
    assert row.passages_dropped >= 1
    assert lm.window().source == "error"
    assert lm.context_window == limit
    # The rest of the run: the next call is fitted before it is sent, and needs no refit.
    result, row = run(lm)
    assert result.ok
    assert len(server.chat_requests()) == 3
    assert (row.refits, row.passages_dropped >= 1) == (0, True)


def test_an_overflow_after_the_refit_is_deterministic(server: ReplayServer) -> None:
    full = estimated(INPUTS)
    server.chat = [llama_cpp_overflow(int(full * 0.8), prompt=full)] * 2
    result, row = run(lm_for(server))
    assert not result.ok
    assert result.error is not None
    assert (result.error.kind, result.error.transient) == ("context_overflow", False)
    assert len(server.chat_requests()) == 2  # one refit, never more
    assert row.failed
    assert row.refits == 1


def test_an_overflow_with_nothing_left_to_drop_is_not_retried(server: ReplayServer) -> None:
    inputs = {"question": "Which vitamin deficiency causes scurvy? " * 40, "evidence": "(no passages)"}
    server.chat = [llama_cpp_overflow(600, prompt=estimated(inputs))]
    result, _ = run(lm_for(server), inputs)
    assert result.error is not None
    assert (result.error.kind, result.error.transient) == ("context_overflow", False)
    assert len(server.chat_requests()) == 1


def test_the_servers_count_decides_the_fit_where_it_has_a_tokenizer() -> None:
    """The estimate says the prompt fits; the server's tokenizer counts twice as many tokens: passages go first."""
    full = estimated(INPUTS)

    def tokenize(body: dict[str, Any]) -> Reply:
        return Reply(200, {"count": 2 * estimate_tokens(str(body.get("prompt", ""))), "max_model_len": 0})

    with ReplayServer({"/tokenize": tokenize}) as fake:
        lm = lm_for(fake, context_window=int(full * 1.3) + BUDGET + 200)
        result, row = run(lm)
    assert result.ok
    assert row.token_counter == "server"
    assert row.passages_dropped >= 1
    (sent,) = fake.chat_requests()
    assert evidence_blocks(sent) < len(LOCAL) + len(WEB)


def test_the_estimate_is_recorded_when_the_server_cannot_count(server: ReplayServer) -> None:
    full = estimated(INPUTS)
    result, row = run(lm_for(server, context_window=int(full * 1.1) + BUDGET + 200))
    assert result.ok
    assert row.token_counter == "estimate"


def test_a_failure_before_the_call_is_recorded_not_an_unbound_local() -> None:
    """Issue 31 item 9: resolving the window raised, and `run_stage` ended in UnboundLocalError: 'retries'."""

    class BrokenWindow(dspy.utils.DummyLM):
        @property
        def context_window(self) -> int:
            raise RuntimeError("the window lookup broke")

    result, row = run(BrokenWindow([{"answer": "C"}]))
    assert result.error is not None
    assert result.error.kind == "internal_error"
    assert "the window lookup broke" in result.error.message
    assert row.failed
    assert row.retries == 0
